package kovnctl

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

// monitorText is a kovn-ovn-monitor scrape of one central node: nb as role, reaching
// connected of 3, led by leader; sb standalone; northd in status.
func monitorText(nbUp bool, role string, connected int, leader, server, northd string) string {
	up := 0
	if nbUp {
		up = 1
	}
	var b strings.Builder
	fmt.Fprintf(&b, "# TYPE kovn_ovn_db_up gauge\nkovn_ovn_db_up{db=\"nb\"} %d\nkovn_ovn_db_up{db=\"sb\"} 1\n", up)
	if nbUp {
		b.WriteString("# TYPE kovn_ovn_db_raft_role gauge\n")
		for _, r := range []string{"leader", "follower", "candidate"} {
			v := 0
			if r == role {
				v = 1
			}
			fmt.Fprintf(&b, "kovn_ovn_db_raft_role{db=\"nb\",role=%q} %d\n", r, v)
		}
		fmt.Fprintf(&b, "# TYPE kovn_ovn_db_raft_leader gauge\nkovn_ovn_db_raft_leader{db=\"nb\",leader=%q,server=%q} 1\n", leader, server)
		fmt.Fprintf(&b, "# TYPE kovn_ovn_db_raft_cluster_member gauge\nkovn_ovn_db_raft_cluster_member{db=\"nb\"} 1\n")
		fmt.Fprintf(&b, "# TYPE kovn_ovn_db_raft_term gauge\nkovn_ovn_db_raft_term{db=\"nb\"} 2\n")
		fmt.Fprintf(&b, "# TYPE kovn_ovn_db_raft_members gauge\nkovn_ovn_db_raft_members{db=\"nb\"} 3\n")
		fmt.Fprintf(&b, "# TYPE kovn_ovn_db_raft_connected_members gauge\nkovn_ovn_db_raft_connected_members{db=\"nb\"} %d\n", connected)
	}
	b.WriteString("# TYPE kovn_ovn_daemon_status gauge\n")
	for _, s := range []string{"active", "standby", "paused"} {
		v := 0
		if s == northd {
			v = 1
		}
		fmt.Fprintf(&b, "kovn_ovn_daemon_status{daemon=\"northd\",status=%q} %d\n", s, v)
	}
	return b.String()
}

func centralScrape(t *testing.T, nodes map[string]string) CentralScrape {
	t.Helper()
	c := CentralScrape{Northd: map[string]string{}}
	for node, text := range nodes {
		members, northd, err := ParseCentral(node, []byte(text))
		if err != nil {
			t.Fatal(err)
		}
		c.Members = append(c.Members, members...)
		c.Northd[node] = northd
		c.Answered++
	}
	return c
}

func centralProblems(c CentralScrape) []string {
	r := Report{Problems: []Problem{}}
	r.central(Inputs{Central: c})
	var out []string
	for _, p := range r.Problems {
		out = append(out, p.Object)
	}
	slices.Sort(out)
	return out
}

func TestCentralProblems(t *testing.T) {
	for _, tc := range []struct {
		name  string
		nodes map[string]string
		want  []string
	}{
		{"healthy", map[string]string{
			"n1": monitorText(true, "leader", 3, "aaaa", "aaaa", "active"),
			"n2": monitorText(true, "follower", 3, "aaaa", "bbbb", "standby"),
			"n3": monitorText(true, "follower", 3, "aaaa", "cccc", "standby")}, nil},
		{"n1 stopped: the others reach 2 of 3, none of their northds took over yet", map[string]string{
			"n2": monitorText(true, "leader", 2, "bbbb", "bbbb", "standby"),
			"n3": monitorText(true, "follower", 2, "bbbb", "cccc", "standby")}, []string{"ovn-northd", "raft/nb/n2", "raft/nb/n3"}},
		{"n1's server down, no leader elected", map[string]string{
			"n1": monitorText(false, "", 0, "", "", "active"),
			"n2": monitorText(true, "candidate", 1, "", "bbbb", "standby")}, []string{"central/n1/nb", "raft/nb", "raft/nb/n2"}},
		{"two northds active", map[string]string{
			"n1": monitorText(true, "leader", 2, "aaaa", "aaaa", "active"),
			"n2": monitorText(true, "follower", 2, "aaaa", "bbbb", "active")}, []string{"ovn-northd", "raft/nb/n1", "raft/nb/n2"}},
	} {
		if got := centralProblems(centralScrape(t, tc.nodes)); !slices.Equal(got, tc.want) {
			t.Errorf("%s: problems %v, want %v", tc.name, got, tc.want)
		}
	}
	if _, _, err := ParseCentral("n1", []byte("# TYPE kovn_pinger_path_lossy gauge\nkovn_pinger_path_lossy 0\n")); err == nil {
		t.Error("a pinger's metrics read as a central monitor's")
	}
}

func TestParseCentral(t *testing.T) {
	members, northd, err := ParseCentral("n2", []byte(monitorText(true, "follower", 2, "aaaa", "bbbb", "standby")))
	if err != nil {
		t.Fatal(err)
	}
	slices.SortFunc(members, func(a, b CentralMember) int { return strings.Compare(a.DB, b.DB) })
	want := []CentralMember{
		{Node: "n2", DB: "nb", Up: true, Role: "follower", Server: "bbbb", Leader: "aaaa", ClusterMember: true, Term: 2, Members: 3, Connected: 2},
		{Node: "n2", DB: "sb", Up: true},
	}
	if !slices.Equal(members, want) || northd != "standby" {
		t.Errorf("ParseCentral: %+v, northd %q; want %+v, standby", members, northd, want)
	}
}
