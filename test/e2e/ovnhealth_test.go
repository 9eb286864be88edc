package e2e

import (
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/kovn/kovn/pkg/kovnctl"
	"github.com/kovn/kovn/test/rig"
)

// centralView is what one central node's kovn-ovn-monitor exports, by database.
type centralView struct {
	DBs    map[string]kovnctl.CentralMember
	Northd string // the status whose series is 1; "" when northd does not answer
}

// parseCentralView reads a scrape as kubectl kovn status does; a scrape that is not a
// monitor's is an empty view, which every check rejects.
func parseCentralView(scrape string) centralView {
	v := centralView{DBs: map[string]kovnctl.CentralMember{}}
	members, northd, err := kovnctl.ParseCentral("", []byte(scrape))
	if err != nil {
		return v
	}
	for _, m := range members {
		v.DBs[m.DB] = m
	}
	v.Northd = northd
	return v
}

// raftAgreement is what the nodes' views agree on for one database.
type raftAgreement struct {
	LeaderNode int
	Term       int
}

// checkCentral: on every node of nodes, NB and SB are raft members of 3 configured servers,
// each reaching exactly connected of them, all naming the same leader in the same term, the
// leader's own view saying it leads; and exactly one northd is active, the others standby.
func checkCentral(views map[int]centralView, nodes []int, connected int) (map[string]raftAgreement, int, error) {
	out := map[string]raftAgreement{}
	for _, db := range []string{"nb", "sb"} {
		var agreed raftAgreement
		var leader string
		for i, n := range nodes {
			mv := views[n].DBs[db]
			if !mv.Up || !mv.ClusterMember || mv.Members != 3 || mv.Connected != connected || mv.Leader == "" {
				return nil, 0, fmt.Errorf("c1-n%d %s: %+v, want a cluster member of 3 reaching %d, knowing its leader", n, db, mv, connected)
			}
			if i == 0 {
				leader, agreed.Term = mv.Leader, mv.Term
			}
			if mv.Leader != leader || mv.Term != agreed.Term {
				return nil, 0, fmt.Errorf("%s: c1-n%d names leader %s in term %d, c1-n%d %s in term %d", db, nodes[0], leader, agreed.Term, n, mv.Leader, mv.Term)
			}
			if (mv.Role == "leader") != (mv.Server == leader) {
				return nil, 0, fmt.Errorf("%s: c1-n%d (%s) is %s, leader %s", db, n, mv.Server, mv.Role, leader)
			}
			if mv.Role == "leader" {
				agreed.LeaderNode = n
			}
		}
		if agreed.LeaderNode == 0 {
			return nil, 0, fmt.Errorf("%s: leader %s is none of c1-n%v", db, leader, nodes)
		}
		out[db] = agreed
	}
	active := 0
	for _, n := range nodes {
		switch views[n].Northd {
		case "active":
			if active != 0 {
				return nil, 0, fmt.Errorf("northd active on c1-n%d and c1-n%d", active, n)
			}
			active = n
		case "standby":
		default:
			return nil, 0, fmt.Errorf("northd on c1-n%d: %q", n, views[n].Northd)
		}
	}
	if active == 0 {
		return nil, 0, fmt.Errorf("no northd active on c1-n%v", nodes)
	}
	return out, active, nil
}

// nbCfgLag: with c1-n3's ovn-controller stopped, the active northd's monitor shows c1-n3
// falling behind NB (at least 2 configurations: nb_cfg is bumped every 5 s in the lab) while
// c1-n1 and c1-n2 keep up; started again, c1-n3 catches up.
func nbCfgLag(t *testing.T, c *cluster, scrape func() string) {
	lag := func(out string, n int) (float64, bool) {
		series := fmt.Sprintf(`kovn_ovn_chassis_nb_cfg_lag{chassis="%s"}`, rig.NodeName(1, n))
		return value(out, series), strings.Contains(out, series+" ")
	}
	check := func(behind int) error {
		out := scrape()
		if value(out, "kovn_ovn_nb_cfg") < 1 {
			return fmt.Errorf("kovn_ovn_nb_cfg %v: not exported, or never bumped", value(out, "kovn_ovn_nb_cfg"))
		}
		for n := 1; n <= 3; n++ {
			l, ok := lag(out, n)
			switch {
			case !ok:
				return fmt.Errorf("no nb_cfg lag for c1-n%d", n)
			case n == behind && l < 2:
				return fmt.Errorf("c1-n%d is %v behind, want >= 2", n, l)
			case n != behind && l != 0:
				return fmt.Errorf("c1-n%d is %v behind, want 0", n, l)
			}
		}
		return nil
	}
	if err := eventually(30*time.Second, func() error { return check(0) }); err != nil {
		t.Fatalf("healthy: %v", err)
	}
	stopComponent(t, c, "c1-n3", "ovn-controller", false)
	start := time.Now()
	err := eventually(30*time.Second, func() error { return check(3) })
	l, _ := lag(scrape(), 3)
	startComponent(t, c, "c1-n3", "ovn-controller")
	if err != nil {
		t.Fatalf("c1-n3's ovn-controller stopped: %v", err)
	}
	t.Logf("c1-n3's ovn-controller stopped: 2 configurations behind after %s (%v now), c1-n1 and c1-n2 0",
		time.Since(start).Round(100*time.Millisecond), l)
	start = time.Now()
	if err := eventually(60*time.Second, func() error { return check(0) }); err != nil {
		t.Fatalf("c1-n3's ovn-controller started again: %v", err)
	}
	t.Logf("c1-n3's ovn-controller started again: caught up after %s", time.Since(start).Round(100*time.Millisecond))
}

// centralHealth: OVN central on 3 nodes (NB and SB raft clusters of 3), read from each node's
// kovn-ovn-monitor. Healthy, the three agree on one leader per database and reach all three;
// a stopped ovn-controller falls behind NB (nbCfgLag).
// The NB leader's node unlabelled (its central pod, so its NB member, stops): within 30 s the
// other two name a new NB leader in a later term and reach 2 of 3 members, and one northd is
// active; labelled again, all three reach 3 again.
func centralHealth(t *testing.T, c *cluster) {
	cfg := c.st.Config
	scrape := func(n int) string {
		return nodeTestbox(t, c.st, cfg.NodeNS(1, n), "get", "http://127.0.0.1:9478/metrics")
	}
	views := func(nodes []int) map[int]centralView {
		out := map[int]centralView{}
		for _, n := range nodes {
			out[n] = parseCentralView(scrape(n))
		}
		return out
	}
	all := []int{1, 2, 3}
	var agreed map[string]raftAgreement
	var active int
	var last map[int]centralView
	if err := eventually(3*time.Minute, func() (err error) {
		last = views(all)
		agreed, active, err = checkCentral(last, all, 3)
		return err
	}); err != nil {
		t.Fatalf("healthy central: %v\n%+v", err, last)
	}
	// The active northd's node serves every series, the chassis' nb_cfg lag too.
	checkDashboardSeries(t, "kovn-ovn-monitor", scrape(active))
	stopped := agreed["nb"].LeaderNode
	t.Logf("healthy: NB leader c1-n%d (term %d), SB leader c1-n%d (term %d), northd active on c1-n%d",
		stopped, agreed["nb"].Term, agreed["sb"].LeaderNode, agreed["sb"].Term, active)
	if err := centralStatus(t, c, 6, nil); err != nil {
		t.Errorf("healthy central: %v", err)
	}
	nbCfgLag(t, c, func() string { return scrape(active) })

	node := rig.NodeName(1, stopped)
	c.kubectlOK("label", "node", node, rig.OVNCentralLabel+"-")
	start := time.Now()
	var rest []int
	for _, n := range all {
		if n != stopped {
			rest = append(rest, n)
		}
	}
	var after map[string]raftAgreement
	if err := eventually(30*time.Second, func() (err error) {
		last = views(rest)
		if after, active, err = checkCentral(last, rest, 2); err != nil {
			return err
		}
		if after["nb"].Term <= agreed["nb"].Term {
			return fmt.Errorf("NB term %d, was %d", after["nb"].Term, agreed["nb"].Term)
		}
		if out := scrape(stopped); strings.Contains(out, "kovn_ovn_db_up") {
			return fmt.Errorf("%s's monitor still serves", node)
		}
		return nil
	}); err != nil {
		t.Fatalf("%s unlabelled %s ago: %v\n%+v", node, time.Since(start).Round(100*time.Millisecond), err, last)
	}
	t.Logf("%s's central stopped: after %s the others name NB leader c1-n%d in term %d and reach 2 of 3, northd active on c1-n%d",
		node, time.Since(start).Round(100*time.Millisecond), after["nb"].LeaderNode, after["nb"].Term, active)
	var want []string
	for _, db := range []string{"nb", "sb"} {
		for _, n := range rest {
			want = append(want, "raft/"+db+"/"+rig.NodeName(1, n))
		}
	}
	if err := centralStatus(t, c, 4, want); err != nil {
		t.Errorf("%s's central stopped: %v", node, err)
	}

	c.kubectlOK("label", "node", node, rig.OVNCentralLabel+"=true")
	start = time.Now()
	if err := eventually(3*time.Minute, func() (err error) {
		last = views(all)
		_, _, err = checkCentral(last, all, 3)
		return err
	}); err != nil {
		t.Fatalf("%s labelled again: %v\n%+v", node, err, last)
	}
	t.Logf("%s labelled again: all three reach 3 members after %s", node, time.Since(start).Round(100*time.Millisecond))
	if err := centralStatus(t, c, 6, nil); err != nil {
		t.Errorf("%s back: %v", node, err)
	}
}

// centralStatus waits up to 30 s for kubectl kovn status to list members central members
// with exactly the OVN central problems want (raft/..., central/..., ovn-northd; sorted): a
// central pod back on its node is scraped through the API server only once the kubelet has
// reported it, a moment after its monitor answers on the node.
func centralStatus(t *testing.T, c *cluster, members int, want []string) error {
	t.Helper()
	return eventually(30*time.Second, func() error {
		out, errOut, _ := c.kubectlKovn("status", "-o", "json") // exit 1 with problems
		var r kovnctl.Report
		if err := json.Unmarshal([]byte(out), &r); err != nil {
			return fmt.Errorf("kubectl kovn status -o json: %v\n%s%s", err, out, errOut)
		}
		if len(r.Central) != members {
			return fmt.Errorf("kubectl kovn status lists %d central members, want %d: %+v", len(r.Central), members, r.Central)
		}
		var got []string
		for _, p := range r.Problems {
			if strings.HasPrefix(p.Object, "raft/") || strings.HasPrefix(p.Object, "central/") || p.Object == "ovn-northd" {
				got = append(got, p.Object)
			}
		}
		sort.Strings(got)
		if !slices.Equal(got, want) {
			return fmt.Errorf("kubectl kovn status: central problems %v, want %v", got, want)
		}
		return nil
	})
}
