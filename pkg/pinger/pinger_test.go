package pinger

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func node(name string, ips ...string) corev1.Node {
	n := corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}
	for _, ip := range ips {
		n.Status.Addresses = append(n.Status.Addresses, corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: ip})
	}
	n.Status.Addresses = append(n.Status.Addresses, corev1.NodeAddress{Type: corev1.NodeHostName, Address: name})
	return n
}

func pingerPod(nodeName string, phase corev1.PodPhase, ips ...string) corev1.Pod {
	p := corev1.Pod{Spec: corev1.PodSpec{NodeName: nodeName}, Status: corev1.PodStatus{Phase: phase}}
	for _, ip := range ips {
		p.Status.PodIPs = append(p.Status.PodIPs, corev1.PodIP{IP: ip})
	}
	return p
}

// TestTargets: every other node (each InternalIP), the pinger pod of every other node (running
// only), the API server, DNS names, external addresses, and the clusterset's pinger addresses
// that are not this cluster's.
func TestTargets(t *testing.T) {
	cfg := Config{Node: "n1", APIServer: "10.96.0.1:443", DNSNames: []string{"kubernetes.default.svc.cluster.local"},
		External: []netip.Addr{netip.MustParseAddr("172.30.0.100")}}
	nodes := []corev1.Node{node("n1", "172.29.0.11"), node("n2", "172.29.0.12", "fd00:29::12"), node("n3", "172.29.0.13")}
	pods := []corev1.Pod{pingerPod("n1", corev1.PodRunning, "10.16.0.2"), pingerPod("n2", corev1.PodRunning, "10.16.0.3", "fd00:10:16::3"),
		pingerPod("n3", corev1.PodPending, "10.16.0.4")}
	remote := []netip.Addr{netip.MustParseAddr("10.16.0.3"), netip.MustParseAddr("10.17.0.9")}
	var got []string
	for _, tg := range Targets(cfg, nodes, pods, remote) {
		got = append(got, fmt.Sprintf("%s %s %s %s %s", tg.Kind, tg.Name, tg.Family, tg.Addr, tg.Host))
	}
	want := []string{
		"dns kubernetes.default.svc.cluster.local  invalid IP kubernetes.default.svc.cluster.local",
		"external 172.30.0.100 ipv4 172.30.0.100 ",
		"node n2 ipv4 172.29.0.12 ",
		"node n2 ipv6 fd00:29::12 ",
		"node n3 ipv4 172.29.0.13 ",
		"pod n2 ipv4 10.16.0.3 ",
		"pod n2 ipv6 fd00:10:16::3 ",
		"remote-pod 10.17.0.9 ipv4 10.17.0.9 ",
		"service kubernetes.default  invalid IP 10.96.0.1:443",
	}
	if !slices.Equal(got, want) {
		t.Errorf("targets:\n%q\nwant\n%q", got, want)
	}
}

// TestMetricsRecord: a round's probes count as sent, the unanswered as lost, and the path is
// lossy once a round lost every probe or two rounds in a row lost one, until a clean round; a
// target gone takes its series.
func TestMetricsRecord(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	tg := Target{Kind: KindPod, Name: "n2", Family: "ipv4"}
	l := []string{"n1", KindPod, "n2", "ipv4"}
	m.record("n1", tg, []time.Duration{time.Millisecond, -1, 2 * time.Millisecond})
	if s, lost, lossy := testutil.ToFloat64(m.sent.WithLabelValues(l...)), testutil.ToFloat64(m.lost.WithLabelValues(l...)),
		testutil.ToFloat64(m.lossy.WithLabelValues(l...)); s != 3 || lost != 1 || lossy != 0 {
		t.Errorf("one lossy round: sent %v lost %v lossy %v, want 3 1 0 (a single drop is no lossy path)", s, lost, lossy)
	}
	m.record("n1", tg, []time.Duration{-1, -1, -1})
	if lost, lossy := testutil.ToFloat64(m.lost.WithLabelValues(l...)), testutil.ToFloat64(m.lossy.WithLabelValues(l...)); lost != 4 || lossy != 1 {
		t.Errorf("two lossy rounds: lost %v lossy %v, want 4 1", lost, lossy)
	}
	m.record("n1", tg, []time.Duration{time.Millisecond, time.Millisecond, time.Millisecond})
	if lossy := testutil.ToFloat64(m.lossy.WithLabelValues(l...)); lossy != 0 {
		t.Errorf("a clean round: lossy %v", lossy)
	}
	m.record("n1", tg, []time.Duration{time.Millisecond, time.Millisecond, time.Millisecond})
	m.record("n1", tg, []time.Duration{-1, -1, -1})
	if lossy := testutil.ToFloat64(m.lossy.WithLabelValues(l...)); lossy != 1 {
		t.Errorf("a round that lost every probe after a clean one: lossy %v, want 1", lossy)
	}
	m.forget("n1", tg)
	if n := testutil.CollectAndCount(m.lossy); n != 0 {
		t.Errorf("%d lossy series left after the target went", n)
	}
}

// TestEcho: a raw-socket echo to loopback addresses is answered (needs CAP_NET_RAW, as the
// pinger's container has). Lost echoes are proven in the lab (TestObserve), where this host's
// own network cannot answer for a blocked path.
func TestEcho(t *testing.T) {
	e, err := newEchoer(icmpV4)
	if err != nil {
		t.Fatalf("%v (unit tests run as root)", err)
	}
	defer e.close()
	ctx := context.Background()
	if d, ok := e.echo(ctx, netip.MustParseAddr("127.0.0.1"), time.Second); !ok || d <= 0 {
		t.Errorf("127.0.0.1: answered %v in %v", ok, d)
	}
	if _, ok := e.echo(ctx, netip.MustParseAddr("127.0.0.2"), 300*time.Millisecond); !ok {
		t.Error("127.0.0.2 (loopback too) unanswered")
	}
}
