package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kovn/kovn/test/rig"
)

// restartPings bounds the echo requests (0.2 s apart, 60 s) run across the controller restart:
// the stream ends streamSettle after a pod created after the takeover answered, so it covers
// the kill, the 15 s leader lease, the new leader's restore and first sync, and that pod.
const restartPings = 300

// controllerRestart kills the leading kovn-controller while pods ping each other and checks
// that the replacement takes the lease over, restores, syncs and serves a new pod with no
// packet lost, no duplicate address and no stale row. The new pod runs on c1-n3, off the
// ping's path: its port would reconfigure the userspace datapath of the node it lands on,
// which can drop a tunnelled packet crossing that node in the same instant (a rig artifact,
// see rig.Config.DatapathPortChanges), and the stream's two nodes must see no such change.
func controllerRestart(t *testing.T, c *cluster, st *rig.State, aIP string) {
	c.t = t
	type result struct {
		out string
		end time.Time
	}
	done := make(chan result, 1)
	stop := fmt.Sprintf("/tmp/stream-stop-%d", time.Now().UnixNano())
	go func() {
		out, _ := c.exec("default", "b", "pingstream", "-c", strconv.Itoa(restartPings), "-i", "200ms", "-W", "2s", "-stop-file", stop, aIP)
		done <- result{out, time.Now()}
	}()
	before := c.settledNBSnapshot()
	portsBefore := pathPortChanges(t, st, 1, 2)
	time.Sleep(2 * time.Second)
	kill := time.Now()
	holder, takeover := killLeader(t, c, st)
	// The new leader restores and re-reconciles everything; nothing changed while no leader ran,
	// so it must write nothing (a rewritten port or ACL makes ovn-controller reinstall flows
	// under live traffic). Its first full sync is over well within 5 s of the takeover.
	time.Sleep(5 * time.Second)
	if changed := nbRewritten(before, c.nbSnapshot()); len(changed) > 0 {
		var rows strings.Builder
		for _, ch := range changed {
			if f := strings.Fields(ch); f[2] != "deleted" {
				rows.WriteString(c.nbctl("list", f[0], f[1]))
			}
		}
		t.Errorf("the new leader rewrote NB rows though nothing changed: %s\n%s", strings.Join(changed, "; "), rows.String())
	}
	c.createPod(testboxPod("default", "after", onNode("c1-n3")))
	p := c.waitRunning("default", "after", 90*time.Second)
	running := time.Now()
	c.ping("default", "a", p.Status.PodIP)
	time.Sleep(streamSettle)
	if out, err := c.exec("default", "b", "touch", stop); err != nil {
		t.Fatalf("ending the ping stream: %v %s", err, out)
	}
	res := <-done
	sent, lost, err := pingLoss(res.out)
	if err != nil || sent == 0 || lost != 0 {
		t.Fatalf("pings across the controller restart: %d sent, %d lost (want 0): %v; datapath port changes on c1-n1, c1-n2 during the stream: %v\n%s",
			sent, lost, err, diffInts(portsBefore, pathPortChanges(t, st, 1, 2)), res.out)
	}
	if !res.end.After(running) {
		t.Fatalf("the pings ended %.1fs after the kill, before the new pod ran (%.1fs): they did not cover the takeover",
			res.end.Sub(kill).Seconds(), running.Sub(kill).Seconds())
	}
	n := assertNoDuplicateIPs(t, c)
	t.Logf("kill -> new leader %s after %.1fs; pod created after the takeover Running at %.1fs with %s; pings %d/%d over %.1fs; %d pods, no duplicate address",
		holder, takeover.Seconds(), running.Sub(kill).Seconds(), p.Status.PodIP, sent-lost, sent, res.end.Sub(kill).Seconds()+2, n)
	for _, name := range []string{"after", "pooled"} {
		c.deletePod("default", name)
	}
	if err := eventually(60*time.Second, func() error {
		out := c.nbctl("--bare", "--columns=name", "find", "Logical_Switch_Port", "external_ids:pod=default/after")
		out += c.nbctl("--bare", "--columns=name", "find", "Logical_Switch_Port", "external_ids:pod=default/pooled")
		if strings.TrimSpace(out) != "" {
			return fmt.Errorf("stale ports: %s", out)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

// pathPortChanges reads rig.Config.DatapathPortChanges of c1's nodes ns.
func pathPortChanges(t *testing.T, st *rig.State, ns ...int) []int {
	t.Helper()
	var out []int
	for _, n := range ns {
		v, err := st.Config.DatapathPortChanges(1, n)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, v)
	}
	return out
}

func diffInts(before, after []int) []int {
	d := make([]int, len(after))
	for i := range after {
		d[i] = after[i] - before[i]
	}
	return d
}

// leaseHolder is the identity holding kovn-controller's leader lease ("" if none).
// killLeader kills (SIGKILL) c1's leading kovn-controller and waits for a new process to hold
// the leader lease, which happens only once the dead leader's lease expires (15 s after its
// last renewal). It returns the new holder and the time from the kill.
func killLeader(t *testing.T, c *cluster, st *rig.State) (string, time.Duration) {
	t.Helper()
	oldHolder := leaseHolder(t, c)
	old := leaderPid(t, c)
	kill := time.Now()
	if err := syscall.Kill(old, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	var holder string
	if err := eventually(60*time.Second, func() error {
		if holder = leaseHolder(t, c); holder == oldHolder || holder == "" {
			return fmt.Errorf("lease kube-system/kovn-controller still held by %q", holder)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	takeover := time.Since(kill)
	if p := leaderPid(t, c); p == old || !rig.Alive(p) {
		t.Fatalf("lease moved to %s but no new kovn-controller process leads", holder)
	}
	return holder, takeover
}

func leaseHolder(t *testing.T, c *cluster) string {
	t.Helper()
	l, err := c.kc.CoordinationV1().Leases("kube-system").Get(context.Background(), "kovn-controller", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("leader lease: %v", err)
	}
	if l.Spec.HolderIdentity == nil {
		return ""
	}
	return *l.Spec.HolderIdentity
}

// assertNoDuplicateIPs fails if two pods share an address or the check cannot be made.
func assertNoDuplicateIPs(t *testing.T, c *cluster) int {
	t.Helper()
	n, err := checkNoDuplicateIPs(context.Background(), c.kc)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// checkNoDuplicateIPs returns how many pod addresses it checked; a failed List is an error,
// never an empty (and so duplicate-free) list.
func checkNoDuplicateIPs(ctx context.Context, kc kubernetes.Interface) (int, error) {
	pods, err := kc.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return 0, fmt.Errorf("list pods for the duplicate-address check: %w", err)
	}
	seen := map[string]string{}
	for _, q := range pods.Items {
		if q.Status.PodIP == "" || q.Spec.HostNetwork {
			continue
		}
		if other, dup := seen[q.Status.PodIP]; dup {
			return 0, fmt.Errorf("pods %s and %s/%s share %s", other, q.Namespace, q.Name, q.Status.PodIP)
		}
		seen[q.Status.PodIP] = q.Namespace + "/" + q.Name
	}
	if len(seen) == 0 {
		return 0, fmt.Errorf("no pod with an address listed: the duplicate-address check checked nothing")
	}
	return len(seen), nil
}

// nbTables are the NB tables kovn-controller writes whose rows only a change of the cluster's
// state should touch (NB_Global and BFD also carry counters and status that OVN writes).
var nbTables = []string{"Logical_Switch", "Logical_Switch_Port", "Logical_Router", "Logical_Router_Port",
	"Logical_Router_Policy", "Logical_Router_Static_Route", "ACL", "Port_Group", "Address_Set",
	"Load_Balancer", "NAT", "DHCP_Options", "Gateway_Chassis", "HA_Chassis_Group", "HA_Chassis"}

// nbSnapshot maps "table uuid" of every row of nbTables to its _version, which OVSDB changes on
// every write to the row.
func (c *cluster) nbSnapshot() map[string]string {
	c.t.Helper()
	var ops []string
	for _, tb := range nbTables {
		ops = append(ops, fmt.Sprintf(`{"op":"select","table":%q,"where":[],"columns":["_uuid","_version"]}`, tb))
	}
	q := `["OVN_Northbound",` + strings.Join(ops, ",") + `]`
	out, err := exec.Command("ovsdb-client", "transact", c.info.NBAddr, q).CombinedOutput()
	if err != nil {
		c.t.Fatalf("ovsdb-client transact: %v %s", err, out)
	}
	var res []struct {
		Rows []struct {
			UUID    []any `json:"_uuid"`
			Version []any `json:"_version"`
		} `json:"rows"`
	}
	if err := json.Unmarshal(out, &res); err != nil || len(res) != len(nbTables) {
		c.t.Fatalf("select NB rows: %v %s", err, out)
	}
	m := map[string]string{}
	for i, r := range res {
		for _, row := range r.Rows {
			m[nbTables[i]+" "+fmt.Sprint(row.UUID[1])] = fmt.Sprint(row.Version[1])
		}
	}
	return m
}

// settledNBSnapshot waits (60 s at most) until NB holds still for 2 s (a cluster just made may
// still be adding DNS pods and their endpoints) and returns that snapshot.
func (c *cluster) settledNBSnapshot() map[string]string {
	c.t.Helper()
	prev := c.nbSnapshot()
	for start := time.Now(); ; {
		time.Sleep(2 * time.Second)
		cur := c.nbSnapshot()
		changed := nbRewritten(prev, cur)
		if len(changed) == 0 {
			return cur
		}
		if time.Since(start) > 60*time.Second {
			c.t.Fatalf("NB did not hold still for 2 s in 60 s before the restart: %s", strings.Join(changed, "; "))
		}
		prev = cur
	}
}

// nbRewritten lists the rows of before that after holds with another _version or not at all,
// and the rows after added.
func nbRewritten(before, after map[string]string) []string {
	var out []string
	for k, v := range before {
		switch w, ok := after[k]; {
		case !ok:
			out = append(out, k+" deleted")
		case w != v:
			out = append(out, k+" rewritten")
		}
	}
	for k := range after {
		if _, ok := before[k]; !ok {
			out = append(out, k+" added")
		}
	}
	sort.Strings(out)
	return out
}
