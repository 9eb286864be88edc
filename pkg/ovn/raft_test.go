package ovn

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"
)

// A follower's view right after the leader (r1) stopped: its connection to r1 is retried.
const followerStatus = `r3
Name: OVN_Northbound
Cluster ID: 32c8 (32c8e3f0-0073-4ba0-be99-4efa54407130)
Server ID: bd82 (bd82e530-29e2-44b7-8ce6-8cc2f0ac7815)
Address: unix:/tmp/raft/r3.raft
Status: cluster member
Role: follower
Term: 2
Leader: r2
Vote: r2

Election timer: 1000
Log: [2, 6]
Entries not yet committed: 1
Entries not yet applied: 2
Connections: (->r1) ->r2 <-r2 <-r1
Disconnections: 1
Servers:
    r3 (bd82 at unix:/tmp/raft/r3.raft) (self)
    r1 (b2c6 at unix:/tmp/raft/r1.raft) last msg 4215 ms ago
    r2 (3346 at unix:/tmp/raft/r2.raft) last msg 193 ms ago
`

func TestParseClusterStatus(t *testing.T) {
	s, err := ParseClusterStatus(followerStatus)
	if err != nil {
		t.Fatal(err)
	}
	want := RaftStatus{Name: "OVN_Northbound", ClusterID: "32c8", ServerID: "bd82", Status: "cluster member", Role: "follower",
		Term: 2, Leader: "3346", LogEntries: 4, Uncommitted: 1, Unapplied: 2,
		Servers: []string{"bd82", "b2c6", "3346"}, Connected: []string{"bd82", "3346"}}
	if fmt.Sprint(s) != fmt.Sprint(want) {
		t.Fatalf("got  %+v\nwant %+v", s, want)
	}
	if _, err := ParseClusterStatus("OVN_Northbound: not a clustered database\n"); err == nil {
		t.Fatal("a standalone database's answer parsed as a raft status")
	}
}

// TestClusterStatusRealRaft runs a 3-member OVN_Northbound raft cluster (ovsdb-servers talking
// over unix sockets in a temporary directory): all three agree on one leader and reach each
// other; with the leader stopped (SIGSTOP) the other two elect a new one in a later term and
// count 2 of 3 members connected; continued, the old leader rejoins and 3 are connected again.
func TestClusterStatusRealRaft(t *testing.T) {
	dir := t.TempDir()
	pids := make([]int, 3)
	for i := range pids {
		db := filepath.Join(dir, fmt.Sprintf("nb%d.db", i))
		raft := func(i int) string { return "unix:" + filepath.Join(dir, fmt.Sprintf("r%d.raft", i)) }
		args := []string{"create-cluster", db, "/usr/share/ovn/ovn-nb.ovsschema", raft(0)}
		if i > 0 {
			args = []string{"join-cluster", db, "OVN_Northbound", raft(i), raft(0)}
		}
		if out, err := exec.Command("ovsdb-tool", args...).CombinedOutput(); err != nil {
			t.Fatalf("ovsdb-tool %v (make deps installs ovn-common): %v %s", args, err, out)
		}
		srv := exec.Command("ovsdb-server", db, "--unixctl="+ctl(dir, i), "--remote=punix:"+filepath.Join(dir, fmt.Sprintf("nb%d.sock", i)),
			"--pidfile="+filepath.Join(dir, fmt.Sprintf("nb%d.pid", i)), "--log-file="+filepath.Join(dir, fmt.Sprintf("nb%d.log", i)))
		if err := srv.Start(); err != nil {
			t.Fatalf("ovsdb-server: %v", err)
		}
		pids[i] = srv.Process.Pid
		t.Cleanup(func() { _ = srv.Process.Signal(syscall.SIGCONT); _ = srv.Process.Kill(); _ = srv.Wait() })
	}
	leader, term := waitRaft(t, dir, []int{0, 1, 2}, -1, 0)
	if err := syscall.Kill(pids[leader], syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	var rest []int
	for i := range 3 {
		if i != leader {
			rest = append(rest, i)
		}
	}
	newLeader, newTerm := waitRaft(t, dir, rest, leader, term)
	t.Logf("member %d stopped: member %d leads in term %d (was %d)", leader, newLeader, newTerm, term)
	if err := syscall.Kill(pids[leader], syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	waitRaft(t, dir, []int{0, 1, 2}, -1, newTerm-1)
}

func ctl(dir string, i int) string { return filepath.Join(dir, fmt.Sprintf("nb%d.ctl", i)) }

// waitRaft waits until members agree on one leader among them in a term after minTerm, the
// leader counting exactly len(members) connected of 3 servers, and returns it and the term.
func waitRaft(t *testing.T, dir string, members []int, stopped int, minTerm int64) (int, int64) {
	t.Helper()
	var last string
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		leader, term, err := agreedLeader(dir, members)
		if err == nil && term > minTerm {
			return leader, term
		}
		last = fmt.Sprint(err, " term ", term)
	}
	t.Fatalf("members %v (member %d stopped) never agreed on a leader after term %d: %s", members, stopped, minTerm, last)
	return 0, 0
}

func agreedLeader(dir string, members []int) (int, int64, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	sids := map[string]int{}
	var statuses []RaftStatus
	for _, i := range members {
		if _, err := os.Stat(ctl(dir, i)); err != nil {
			return 0, 0, err
		}
		s, err := ClusterStatus(ctx, ctl(dir, i), "OVN_Northbound")
		if err != nil {
			return 0, 0, err
		}
		sids[s.ServerID] = i
		statuses = append(statuses, s)
	}
	lead := statuses[0].Leader
	for _, s := range statuses {
		if s.Leader != lead || lead == "" || s.Term != statuses[0].Term || len(s.Servers) != 3 {
			return 0, s.Term, fmt.Errorf("member %s: leader %q term %d, servers %v", s.ServerID, s.Leader, s.Term, s.Servers)
		}
		if s.ServerID == lead && (s.Role != "leader" || len(s.Connected) != len(members) || !slices.Contains(s.Connected, lead)) {
			return 0, s.Term, fmt.Errorf("leader %s: role %s, connected %v", lead, s.Role, s.Connected)
		}
	}
	i, ok := sids[lead]
	if !ok {
		return 0, 0, fmt.Errorf("leader %s is not among members %v", lead, members)
	}
	return i, statuses[0].Term, nil
}
