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

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kovn/kovn/pkg/cluster/topology"
	"github.com/kovn/kovn/test/bench/report"
	"github.com/kovn/kovn/test/rig"
)

const (
	svcNS        = "bench-svc"
	svcLBPrefix  = "Service_" + svcNS + "/"
	endpointPort = 8080
	// svcTxSample is kovn-controller's counter of NB transactions for Service shards.
	svcTxSample = `kovn_nb_transactions_total{owner_type="Service"}`
	svcOpSample = `kovn_nb_operations_total{owner_type="Service"}`
)

// svcParams are the knobs of TestServiceScale.
type svcParams struct{ services, endpoints, changes, workers int }

// svcBench is one run: the rig's API and NB, and where fake endpoint addresses come from.
type svcBench struct {
	svcParams
	r     *rig.Rig
	kc    kubernetes.Interface
	w     *nbWatch
	addrs endpointAddrs
}

// TestServiceScale: the Services benchmark, against the real kube-apiserver and NB
// (ovsdb-server) of a one-node rig, with the rig's kovn-controller doing the work.
//   - programming: KOVN_BENCH_SERVICES (1,000) selector-less Services, each with one
//     EndpointSlice of KOVN_BENCH_ENDPOINTS (10) ready endpoints at fake addresses in the pod
//     CIDR, created by 8 clients as fast as the API takes them; time from the first create
//     until every load balancer is in NB with all its backends, and the NB transactions
//     kovn-controller sent for Service shards (its kovn_nb_transactions_total).
//   - endpoint change: KOVN_BENCH_CHANGES (50) times, one Service's slice gets one endpoint
//     replaced; update call -> the new backend in the load balancer's row in NB, and -> the
//     chassis has the flows (nb_cfg bumped once NB has the change, hv_cfg waited for).
//
// Selector-less Services keep kube-controller-manager's EndpointSlice controller out: the
// slices are the benchmark's own, and kovn-controller reads any slice by its service-name label.
func TestServiceScale(t *testing.T) {
	sp := svcParams{services: envInt("KOVN_BENCH_SERVICES", 1000), endpoints: envInt("KOVN_BENCH_ENDPOINTS", 10),
		changes: envInt("KOVN_BENCH_CHANGES", 50), workers: 8}
	r := upRig(t, rig.Config{Nodes: 1})
	b := &svcBench{svcParams: sp, r: r, kc: kubernetes.NewForConfigOrDie(restConfig(t, r)), w: watchNB(t, r),
		addrs: newEndpointAddrs(t, r.State.Config.PodCIDRs(1)[0], sp.services*sp.endpoints+sp.changes)}
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Minute)
	defer cancel()
	b.checkChassis(t, ctx)
	createNamespace(t, b.kc, svcNS)
	prog := b.program(t, ctx)
	toNB, toNode := b.changeAll(t, ctx)
	sNB, sNode := report.Summarize(toNB), report.Summarize(toNode)
	lines := append(prog,
		fmt.Sprintf("endpoint change with %d Services present, %d changes, one at a time:", sp.services, len(toNB)),
		fmt.Sprintf("  update call -> load balancer row in NB:                %s", sNB),
		fmt.Sprintf("  update call -> flows on the chassis (nb_cfg -> hv_cfg): %s (goal p99 < 1s)", sNode))
	b.write(t, lines, toNB, toNode)
}

// checkChassis makes sure hv_cfg has a chassis behind it (with none, ovn-northd would echo
// nb_cfg at once and the "-> node" figures would be meaningless) and that it follows nb_cfg.
func (b *svcBench) checkChassis(t *testing.T, ctx context.Context) {
	names, err := rig.Chassis(b.r.State.Clusters[0])
	if err != nil || len(names) == 0 {
		t.Fatalf("no chassis in SB (%v): hv_cfg would not measure any node", err)
	}
	cctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	start := time.Now()
	if _, err := b.w.syncChassis(cctx); err != nil {
		t.Fatalf("hv_cfg does not follow nb_cfg: %v", err)
	}
	t.Logf("chassis %s; first nb_cfg -> hv_cfg round trip %s", strings.Join(names, " "), time.Since(start).Round(time.Millisecond))
}

// program creates every Service and its slice and waits until NB has all the load balancers
// with all their backends; it returns the figures as lines.
func (b *svcBench) program(t *testing.T, ctx context.Context) []string {
	pid, err := b.r.State.DaemonPid("c1", "kovn-controller")
	if err != nil {
		t.Fatal(err)
	}
	cpu0, _ := report.ReadProc(pid)
	tx0, ops0 := controllerMetric(t, b.r, svcTxSample), controllerMetric(t, b.r, svcOpSample)
	start := time.Now()
	b.createAll(t, ctx)
	created := time.Since(start)
	done, err := b.w.waitFor(ctx, func(w *nbWatch) bool { return w.programmed(svcLBPrefix, b.endpoints) >= b.services })
	if err != nil {
		b.w.mu.Lock()
		n := b.w.programmed(svcLBPrefix, b.endpoints)
		b.w.mu.Unlock()
		t.Fatalf("%d of %d load balancers programmed: %v", n, b.services, err)
	}
	// The counter is bumped when a transaction returns, just after its rows reach our monitor.
	time.Sleep(2 * time.Second)
	tx, ops := controllerMetric(t, b.r, svcTxSample)-tx0, controllerMetric(t, b.r, svcOpSample)-ops0
	cpu1, _ := report.ReadProc(pid)
	took := done.Sub(start)
	return []string{
		fmt.Sprintf("%d Services x %d endpoints (selector-less, one EndpointSlice each, %d clients):", b.services, b.endpoints, b.workers),
		fmt.Sprintf("  all created in %.1fs; all load balancers in NB with every backend %.1fs after the first create (%.0f Services/s)",
			created.Seconds(), took.Seconds(), float64(b.services)/took.Seconds()),
		fmt.Sprintf("  NB transactions for Service shards: %.0f (%.2f per Service), %.0f operations", tx, tx/float64(b.services), ops),
		fmt.Sprintf("  kovn-controller meanwhile: %s", report.Usage(cpu0, cpu1)),
	}
}

// createAll creates Service i then its slice, for every i, from b.workers clients. A worker
// that fails keeps draining the queue (so the feeder never blocks); the first error is fatal.
func (b *svcBench) createAll(t *testing.T, ctx context.Context) {
	idx := make(chan int)
	var wg sync.WaitGroup
	var once sync.Once
	var first error
	failed := make(chan struct{})
	for range b.workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range idx {
				if err := b.create(ctx, i); err != nil {
					once.Do(func() { first = err; close(failed) })
				}
			}
		}()
	}
feed:
	for i := 0; i < b.services; i++ {
		select {
		case idx <- i:
		case <-failed:
			break feed
		}
	}
	close(idx)
	wg.Wait()
	if first != nil {
		t.Fatal(first)
	}
}

func (b *svcBench) create(ctx context.Context, i int) error {
	name := svcName(i)
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: svcNS, Name: name},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 80}}}}
	if _, err := b.kc.CoreV1().Services(svcNS).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("service %s: %w", name, err)
	}
	eps := make([]netip.Addr, b.endpoints)
	for e := range eps {
		eps[e] = b.addrs.at(1 + i*b.endpoints + e)
	}
	if _, err := b.kc.DiscoveryV1().EndpointSlices(svcNS).Create(ctx, benchSlice(name, eps), metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("slice of %s: %w", name, err)
	}
	return nil
}

func svcName(i int) string { return fmt.Sprintf("s%05d", i) }

// benchSlice is a Service's slice with one ready endpoint per address, named port "http".
func benchSlice(svc string, addrs []netip.Addr) *discoveryv1.EndpointSlice {
	port, ready, portName := int32(endpointPort), true, "http"
	typ := discoveryv1.AddressTypeIPv4
	if addrs[0].Is6() {
		typ = discoveryv1.AddressTypeIPv6
	}
	sl := &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: svcNS, Name: svc + "-bench",
		Labels: map[string]string{discoveryv1.LabelServiceName: svc}},
		AddressType: typ, Ports: []discoveryv1.EndpointPort{{Name: &portName, Port: &port}}}
	for _, a := range addrs {
		sl.Endpoints = append(sl.Endpoints, discoveryv1.Endpoint{Addresses: []string{a.String()},
			Conditions: discoveryv1.EndpointConditions{Ready: &ready}})
	}
	return sl
}

// changeAll makes b.changes endpoint changes, one at a time, spread over the Services.
func (b *svcBench) changeAll(t *testing.T, ctx context.Context) (toNB, toNode []time.Duration) {
	for k := 0; k < b.changes; k++ {
		i := k * b.services / b.changes % b.services
		nbAt, nodeAt := b.change(t, ctx, i, b.addrs.at(1+b.services*b.endpoints+k))
		toNB, toNode = append(toNB, nbAt), append(toNode, nodeAt)
	}
	return toNB, toNode
}

// change replaces the first endpoint of Service i with addr (never used before, so the load
// balancer must change) and returns update call -> NB and -> hv_cfg.
func (b *svcBench) change(t *testing.T, ctx context.Context, i int, addr netip.Addr) (time.Duration, time.Duration) {
	slices := b.kc.DiscoveryV1().EndpointSlices(svcNS)
	cur, err := slices.Get(ctx, svcName(i)+"-bench", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cur.Endpoints[0].Addresses = []string{addr.String()}
	lb := topology.ServiceLBName(svcNS, svcName(i), "TCP")
	want := netip.AddrPortFrom(addr, endpointPort).String()
	start := time.Now()
	if _, err := slices.Update(ctx, cur, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	cctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	nbAt, err := b.w.waitFor(cctx, func(w *nbWatch) bool { return w.backends[lb][want] })
	if err != nil {
		t.Fatalf("%s never got backend %s: %v", lb, want, err)
	}
	nodeAt, err := b.w.syncChassis(cctx)
	if err != nil {
		t.Fatalf("hv_cfg after changing %s: %v", lb, err)
	}
	return nbAt.Sub(start), nodeAt.Sub(start)
}

// write prints the figures and keeps them, with the raw change samples, in _output/bench.
func (b *svcBench) write(t *testing.T, lines []string, toNB, toNode []time.Duration) {
	text := "\n== Services benchmark\n" + strings.Join(lines, "\n") + "\n"
	fmt.Print(text)
	out := outDir(t)
	var csv strings.Builder
	csv.WriteString("change,to_nb_ms,to_node_ms\n")
	for k := range toNB {
		fmt.Fprintf(&csv, "%d,%.1f,%.1f\n", k, float64(toNB[k])/float64(time.Millisecond), float64(toNode[k])/float64(time.Millisecond))
	}
	for name, body := range map[string]string{"services.txt": text, "services-changes.csv": csv.String()} {
		if err := os.WriteFile(filepath.Join(out, name), []byte(body), 0o644); err != nil {
			t.Error(err)
		}
	}
	fmt.Printf("figures: %s, samples: %s\n", filepath.Join(out, "services.txt"), filepath.Join(out, "services-changes.csv"))
}
