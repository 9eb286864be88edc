package ovnmonitor

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// start runs argv until the test ends and waits for socket to appear.
func start(t *testing.T, socket string, argv ...string) {
	t.Helper()
	cmd := exec.Command(argv[0], argv[1:]...)
	if err := cmd.Start(); err != nil {
		t.Fatalf("%s (make deps installs OVN): %v", argv[0], err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	for i := 0; ; i++ {
		if _, err := os.Stat(socket); err == nil {
			return
		}
		if i == 100 {
			t.Fatalf("%s made no %s in 10 s", argv[0], socket)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func tool(t *testing.T, args ...string) {
	t.Helper()
	if out, err := exec.Command("ovsdb-tool", args...).CombinedOutput(); err != nil {
		t.Fatalf("ovsdb-tool %v: %v %s", args, err, out)
	}
}

// TestCollector reads real daemons: a one-member raft NB (the leader of its cluster), a
// standalone SB (up, no raft series), an ovn-northd on both (active: the only one holding
// the SB lock) and an IC-NB whose server is not running (down).
func TestCollector(t *testing.T) {
	dir := t.TempDir()
	path := func(f string) string { return filepath.Join(dir, f) }
	tool(t, "create-cluster", path("nb.db"), "/usr/share/ovn/ovn-nb.ovsschema", "unix:"+path("nb.raft"))
	tool(t, "create", path("sb.db"), "/usr/share/ovn/ovn-sb.ovsschema")
	for _, db := range []string{"nb", "sb"} {
		start(t, path(db+".ctl"), "ovsdb-server", path(db+".db"), "--remote=punix:"+path(db+".sock"), "--unixctl="+path(db+".ctl"),
			"--pidfile="+path(db+".pid"), "--log-file="+path(db+".log"))
	}
	start(t, path("northd.ctl"), "ovn-northd", "--ovnnb-db=unix:"+path("nb.sock"), "--ovnsb-db=unix:"+path("sb.sock"),
		"--unixctl="+path("northd.ctl"), "--pidfile="+path("northd.pid"), "--log-file="+path("northd.log"))
	c := &Collector{
		DBs: []DB{{Label: "nb", Name: "OVN_Northbound", Ctl: path("nb.ctl"), File: path("nb.db")},
			{Label: "sb", Name: "OVN_Southbound", Ctl: path("sb.ctl")},
			{Label: "ic-nb", Name: "OVN_IC_Northbound", Ctl: path("icnb.ctl")}},
		Daemons: []Daemon{{Label: "northd", Ctl: path("northd.ctl")}, {Label: "ic", Ctl: path("ic.ctl")}},
	}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c)
	want := `kovn_ovn_daemon_status{daemon="northd",status="active"} 1
kovn_ovn_daemon_status{daemon="northd",status="paused"} 0
kovn_ovn_daemon_status{daemon="northd",status="standby"} 0
kovn_ovn_daemon_up{daemon="ic"} 0
kovn_ovn_daemon_up{daemon="northd"} 1
kovn_ovn_db_raft_cluster_member{db="nb"} 1
kovn_ovn_db_raft_connected_members{db="nb"} 1
kovn_ovn_db_raft_members{db="nb"} 1
kovn_ovn_db_raft_role{db="nb",role="candidate"} 0
kovn_ovn_db_raft_role{db="nb",role="follower"} 0
kovn_ovn_db_raft_role{db="nb",role="leader"} 1
kovn_ovn_db_raft_term{db="nb"} 1
kovn_ovn_db_raft_uncommitted_entries{db="nb"} 0
kovn_ovn_db_up{db="ic-nb"} 0
kovn_ovn_db_up{db="nb"} 1
kovn_ovn_db_up{db="sb"} 1
`
	var got string
	for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		got = scrape(t, reg)
		if got == want {
			break
		}
	}
	if got != want {
		t.Fatalf("got\n%s\nwant\n%s", got, want)
	}
	// The series whose values depend on timing: present, with plausible values.
	full, err := testutil.GatherAndCount(reg, "kovn_ovn_db_file_bytes", "kovn_ovn_db_raft_log_entries",
		"kovn_ovn_db_raft_unapplied_entries", "kovn_ovn_db_raft_leader")
	if err != nil || full != 4 {
		t.Fatalf("file size, log and leader series: %d, %v", full, err)
	}
}

// scrape renders the series whose values do not depend on timing, sorted.
func scrape(t *testing.T, reg *prometheus.Registry) string {
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, mf := range mfs {
		switch mf.GetName() {
		case "kovn_ovn_db_file_bytes", "kovn_ovn_db_raft_log_entries", "kovn_ovn_db_raft_unapplied_entries", "kovn_ovn_db_raft_leader":
			continue
		}
		for _, m := range mf.GetMetric() {
			var labels []string
			for _, l := range m.GetLabel() {
				labels = append(labels, fmt.Sprintf("%s=%q", l.GetName(), l.GetValue()))
			}
			fmt.Fprintf(&b, "%s{%s} %v\n", mf.GetName(), strings.Join(labels, ","), m.GetGauge().GetValue())
		}
	}
	return b.String()
}
