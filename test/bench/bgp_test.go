//go:build bench

package bench

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kovnv1 "github.com/kovn/kovn/api/v1alpha1"
	"github.com/kovn/kovn/test/rig"
)

// TestBGPBench: one cluster of two nodes whose speakers peer with the rig's ToR (FRR). Printed,
// p50/p99/max over KOVN_BENCH_BGP_SUBNETS (50) Subnets, one at a time: bgpAdvertise set (the
// patch call's return) -> the route in the ToR's kernel with both nodes as next hops (zebra
// installed what bgpd learned: the router forwards on it); then bgpAdvertise cleared -> the
// route gone from the ToR's kernel. The subnets exist before, so only the announcement is timed.
func TestBGPBench(t *testing.T) {
	n := envInt("KOVN_BENCH_BGP_SUBNETS", 50)
	r := upRig(t, rig.Config{Nodes: 2})
	cfg := r.State.Config
	c := &benchCluster{t: t, cfg: cfg, kubeconfig: r.State.Clusters[0].Kubeconfig, name: "c1"}
	c.kubectl(fmt.Sprintf(`apiVersion: kovn.io/v1alpha1
kind: BgpPeer
metadata: {name: tor}
spec: {peerAddress: %q, peerASN: %d, localASN: %d, holdTimeSeconds: 9}
`, rig.ToRIP(), rig.ToRASN, rig.SpeakerASN), "apply", "-f", "-")
	kc := benchClient(t, r.State.Clusters[0].Kubeconfig)
	ctx := context.Background()
	for i := range n {
		sn := &kovnv1.Subnet{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("bgp%03d", i)},
			Spec: kovnv1.SubnetSpec{CIDRBlock: fmt.Sprintf("10.%d.%d.0/24", 40+i/256, i%256), NATOutgoing: true}}
		mustCreate(t, kc, sn)
	}
	fib := watchFIB(t, cfg.ToRNS())
	time.Sleep(5 * time.Second) // sessions up, subnets programmed
	var on, off []time.Duration
	for i := range n {
		name := fmt.Sprintf("bgp%03d", i)
		prefix := netip.MustParsePrefix(fmt.Sprintf("10.%d.%d.0/24", 40+i/256, i%256))
		on = append(on, fib.timeTo(t, func() { setAdvertise(t, ctx, kc, name, true) }, prefix, 2))
		off = append(off, fib.timeTo(t, func() { setAdvertise(t, ctx, kc, name, false) }, prefix, 0))
	}
	lines := []string{fmt.Sprintf("BGP, 1 cluster x 2 speaker nodes, FRR ToR; %d Subnets announced and withdrawn one at a time", n),
		"bgpAdvertise set -> route in the ToR's kernel via both nodes: " + stats(on),
		"bgpAdvertise cleared -> route gone from the ToR's kernel: " + stats(off)}
	out := strings.Join(lines, "\n") + "\n"
	fmt.Print("\n== " + out)
	if err := os.WriteFile(filepath.Join(outDir(t), "bgp.txt"), []byte(out), 0o644); err != nil {
		t.Error(err)
	}
}

func benchClient(t *testing.T, kubeconfig string) client.Client {
	t.Helper()
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	_ = kovnv1.AddToScheme(scheme)
	rc, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	rc.QPS, rc.Burst = -1, -1
	kc, err := client.New(rc, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	return kc
}

func setAdvertise(t *testing.T, ctx context.Context, kc client.Client, name string, on bool) {
	t.Helper()
	patch := client.RawPatch(types.MergePatchType, []byte(fmt.Sprintf(`{"spec":{"bgpAdvertise":%t}}`, on)))
	if err := kc.Patch(ctx, &kovnv1.Subnet{ObjectMeta: metav1.ObjectMeta{Name: name}}, patch); err != nil {
		t.Fatal(err)
	}
}

// fibWatch follows the routes of a namespace's kernel through netlink: prefix -> next hops.
type fibWatch struct {
	mu      sync.Mutex
	hops    map[netip.Prefix]int
	changed chan struct{}
}

func watchFIB(t *testing.T, ns string) *fibWatch {
	t.Helper()
	h, err := netns.GetFromName(ns)
	if err != nil {
		t.Fatal(err)
	}
	updates, done := make(chan netlink.RouteUpdate, 1024), make(chan struct{})
	t.Cleanup(func() { close(done); h.Close() })
	if err := netlink.RouteSubscribeWithOptions(updates, done, netlink.RouteSubscribeOptions{Namespace: &h}); err != nil {
		t.Fatal(err)
	}
	w := &fibWatch{hops: map[netip.Prefix]int{}, changed: make(chan struct{}, 1)}
	go func() {
		for u := range updates {
			if u.Dst == nil {
				continue
			}
			p, ok := netip.AddrFromSlice(u.Dst.IP)
			if !ok {
				continue
			}
			ones, _ := u.Dst.Mask.Size()
			prefix := netip.PrefixFrom(p.Unmap(), ones)
			n := max(len(u.MultiPath), 1)
			w.mu.Lock()
			if u.Type == 24 { // RTM_NEWROUTE
				w.hops[prefix] = n
			} else {
				delete(w.hops, prefix)
			}
			w.mu.Unlock()
			select {
			case w.changed <- struct{}{}:
			default:
			}
		}
	}()
	return w
}

// timeTo runs act and returns how long until prefix has hops next hops (0: absent).
func (w *fibWatch) timeTo(t *testing.T, act func(), prefix netip.Prefix, hops int) time.Duration {
	t.Helper()
	act()
	start := time.Now()
	deadline := time.After(30 * time.Second)
	for {
		w.mu.Lock()
		got := w.hops[prefix]
		w.mu.Unlock()
		if got == hops {
			return time.Since(start)
		}
		select {
		case <-w.changed:
		case <-time.After(5 * time.Millisecond):
		case <-deadline:
			t.Fatalf("%s: %d next hops in the ToR's kernel after 30 s, want %d", prefix, got, hops)
		}
	}
}
