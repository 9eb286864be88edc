package e2e

import (
	"context"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kovn/kovn/pkg/annotation"

	"github.com/kovn/kovn/test/rig"
)

// peerHealthRemoval: c2 exports web (pod be-web, on c2-n3); c1's pod a reaches it at its
// ClusterSetIP. IC-SB (and the clusterset store beside it) stopped, then both of c2's gateways'
// fabric links cut: nothing in the clusterset says c2 is gone (its export and endpoints are
// still in c2's API and, as last read, in c1's), only the BFD sessions c1's gateways run toward
// c2's (peerprobe). A 50 ms request stream from a: every request sent 1 s or more after the cut is
// refused at once (the import lost c2's endpoints), none times out; requests in flight at the
// cut time out (their connections were already on their way to c2). The links back: be-web
// answers again; IC-SB back.
func peerHealthRemoval(t *testing.T, a, b *cluster, cfg rig.Config, st *rig.State) {
	svc := mcsService("web", map[string]string{"health": "web"})
	svc.Namespace = "default"
	be := testboxPod("default", "be-web", onNode("c2-n3")) // backendsSeen reads names be*
	be.Labels["health"] = "web"
	b.createPod(be)
	b.waitRunning("default", "be-web", 90*time.Second)
	b.createService(svc)
	b.exportService("default", "web")
	defer func() {
		b.unexportService("default", "web")
		b.kubectlOK("delete", "service", "-n", "default", "web")
		b.deletePod("default", "be-web")
	}()
	si := a.waitImport("default", "web", func(si serviceImport) error {
		if len(si.Spec.IPs) == 0 {
			return fmt.Errorf("no ClusterSetIP")
		}
		return nil
	})
	ip := si.Spec.IPs[0]
	a.waitBackends("default", "a", ip, []string{"be-web"}, 60*time.Second)
	a.waitPeersDown("az2", false, 30*time.Second)
	for n := 1; n <= 2; n++ { // c1's gateways' sessions up, so a loss is one
		waitProbesUp(t, cfg, 1, n, "az2", 30*time.Second)
	}

	startICSB := stopICSB(t, st)
	defer func() { _ = startICSB() }()
	stream := a.startStream("default", "a", "http://"+hostPort(ip, 80)+"/", 2*time.Second)
	a.waitBackends("default", "a", ip, []string{"be-web"}, 10*time.Second) // the stream runs meanwhile
	cut := time.Now()
	for n := 1; n <= 2; n++ {
		setFabricLink(t, cfg, 2, n, false)
	}
	restored := false
	restore := func() {
		if !restored {
			restored = true
			for n := 1; n <= 2; n++ {
				setFabricLink(t, cfg, 2, n, true)
			}
		}
	}
	defer restore()
	a.waitPeersDown("az2", true, 10*time.Second)
	// The stream's window: 2.5 s after the cut, so that 1.5 s of it is past the bound.
	time.Sleep(time.Until(cut.Add(2500 * time.Millisecond)))
	out := stream()
	removed, inFlight, late := judgeRemoval(streamRequests(out), cut)
	if removed < 0 || removed > 1000 || len(late) > 0 {
		t.Errorf("c2's gateways cut with IC-SB down: first refusal %d ms after the cut (want within 1,000), requests sent after 1 s not refused: %v\n%s",
			removed, late, out)
	} else {
		t.Logf("IC-SB down, c2's gateways' links cut: c1's client refused from %d ms after the cut; %d requests sent before that timed out (in flight toward c2); every later one refused; %s",
			removed, inFlight, strings.SplitN(out, "\n", 2)[0])
	}

	back := time.Now()
	restore()
	a.waitBackends("default", "a", ip, []string{"be-web"}, 60*time.Second)
	t.Logf("links back: a answered by be-web again %.1fs later", time.Since(back).Seconds())
	if err := startICSB(); err != nil {
		t.Fatal(err)
	}
	for _, c := range []*cluster{a, b} {
		c.waitInterConnect(func(s icStatus) error {
			if s.ready != "True" || len(s.peers) != 1 {
				return fmt.Errorf("ready %q (%s), peers %v", s.ready, s.message, s.peers)
			}
			return nil
		})
	}
	b.waitActiveGateway("c2-n1") // failed back: the next subtests start where they expect
}

// judgeRemoval reads a request stream around cut: removed is the first refusal's send time
// after the cut (ms, -1 if none), inFlight the requests between the cut and it that failed
// otherwise, late the requests sent 1 s or more after the cut that were not refused.
func judgeRemoval(rs []streamRequest, cut time.Time) (removed int64, inFlight int, late []string) {
	removed = -1
	c := cut.UnixMilli()
	for _, r := range rs {
		since := r.at - c
		switch {
		case since < 0:
		case r.failed == "refused" && removed < 0:
			removed = since
		case removed < 0 && since < 1000:
			inFlight++
		case since >= 1000 && r.failed != "refused":
			late = append(late, fmt.Sprintf("+%dms %s%s", since, r.host, r.failed))
		}
	}
	return removed, inFlight, late
}

// waitPeersDown waits until this cluster's gateway nodes that probe az all report it down
// (down true) or none does (false): what kovn-controller follows.
func (c *cluster) waitPeersDown(az string, down bool, timeout time.Duration) {
	c.t.Helper()
	err := eventually(timeout, func() error {
		nodes, err := c.kc.CoreV1().Nodes().List(context.Background(), metav1.ListOptions{})
		if err != nil {
			return err
		}
		probing, reporting := 0, 0
		for _, n := range nodes.Items {
			if !strings.Contains(n.Annotations[annotation.ICPeerGateways], az+"=") {
				continue
			}
			probing++
			if slices.Contains(annotation.ParsePeersDown(n.Annotations[annotation.ICPeersDown]), az) {
				reporting++
			}
		}
		if probing == 0 || down && reporting != probing || !down && reporting != 0 {
			return fmt.Errorf("%d gateway nodes probe %s, %d report it down", probing, az, reporting)
		}
		return nil
	})
	if err != nil {
		c.t.Fatalf("%v (want %s down: %t)", err, az, down)
	}
}

// waitProbesUp waits until every probe tunnel of node n of cluster cl toward az has its BFD
// session up.
func waitProbesUp(t *testing.T, cfg rig.Config, cl, n int, az string, timeout time.Duration) {
	t.Helper()
	err := eventually(timeout, func() error {
		out, err := exec.Command("ovs-vsctl", "--db=unix:"+cfg.OVSDBSocket(cl, n), "--bare", "--columns=bfd_status", "find", "Interface",
			`external_ids:"kovn.io/owner"=`+az).CombinedOutput()
		if err != nil {
			return fmt.Errorf("%v: %s", err, out)
		}
		rows := strings.Split(strings.TrimSpace(string(out)), "\n\n")
		if len(rows) == 0 || rows[0] == "" {
			return fmt.Errorf("no probe tunnel toward %s", az)
		}
		for _, r := range rows {
			if !strings.Contains(r, "state=up") {
				return fmt.Errorf("probe session toward %s: %s", az, r)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("c%d-n%d: %v", cl, n, err)
	}
}
