//go:build bench

package bench

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
	mcsv1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/kovn/kovn/pkg/cluster/topology"
	"github.com/kovn/kovn/pkg/interconnect/mcs"
	"github.com/kovn/kovn/test/bench/report"
	"github.com/kovn/kovn/test/rig"
)

const mcsNS = "bench-mcs"

// TestMCSBench: two one-node clusters joined. c1 runs selector-less Services whose
// EndpointSlices hold fake addresses in its pod CIDR (nothing answers; the load balancers are
// measured). Printed, p50/p99/max over KOVN_BENCH_MCS_SERVICES (50) Services, one at a time:
// ServiceExport created in c1 -> c2's NB holds the load balancer of the import with the
// backend; an endpoint changed in c1 -> c2's load balancer has the new backend. Then
// KOVN_BENCH_MCS_SLICES (1500) more EndpointSlices are exported (30 per Service): time until
// c2 holds all of them, and the endpoint changes measured again with them in place.
func TestMCSBench(t *testing.T) {
	n, nSlices := envInt("KOVN_BENCH_MCS_SERVICES", 50), envInt("KOVN_BENCH_MCS_SLICES", 1500)
	r := upRig(t, rig.Config{Clusters: 2, Nodes: 1})
	cs := make([]*benchCluster, 2)
	kc := make([]client.Client, 2)
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	_ = mcsv1.Install(scheme)
	for i := range cs {
		cs[i] = &benchCluster{t: t, cfg: r.State.Config, kubeconfig: r.State.Clusters[i].Kubeconfig, name: rig.ClusterName(i + 1)}
		cs[i].interconnect(fmt.Sprintf("az%d", i+1), "ActiveStandby", rig.NodeName(i+1, 1))
		cs[i].kubectl("", "create", "namespace", mcsNS)
		rc, err := clientcmd.BuildConfigFromFlags("", r.State.Clusters[i].Kubeconfig)
		if err != nil {
			t.Fatal(err)
		}
		rc.QPS, rc.Burst = -1, -1
		if kc[i], err = client.New(rc, client.Options{Scheme: scheme}); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range cs {
		c.waitReady()
	}
	w := watchNBOf(t, r.State.Clusters[1].NBAddr)
	addrs := newEndpointAddrs(t, r.State.Config.PodCIDRs(1)[0], 2*n+nSlices+10)
	ctx := context.Background()
	next := 1
	fresh := func() netip.Addr { next++; return addrs.at(next) }

	var export, change []time.Duration
	for i := range n {
		name := fmt.Sprintf("m%03d", i)
		a := fresh()
		mustCreate(t, kc[0], mcsBenchService(name))
		mustCreate(t, kc[0], mcsBenchSlice(name, name, a))
		start := time.Now()
		mustCreate(t, kc[0], &mcsv1.ServiceExport{ObjectMeta: metav1.ObjectMeta{Namespace: mcsNS, Name: name}})
		export = append(export, waitBackend(t, ctx, w, name, a, start))
	}
	for i := range n {
		change = append(change, changeEndpoint(t, ctx, kc[0], w, fmt.Sprintf("m%03d", i), fmt.Sprintf("m%03d", i), fresh()))
	}
	lines := []string{fmt.Sprintf("MCS, 2 clusters x 1 node, %d Services exported one at a time from c1, measured in c2's NB", n),
		"export -> c2's load balancer with the backend: " + stats(export),
		"endpoint changed in c1 -> c2's load balancer updated: " + stats(change)}

	perSvc := 30
	nBig := (nSlices + perSvc - 1) / perSvc
	start := time.Now()
	var want []netip.Addr
	for i := range nBig {
		name := fmt.Sprintf("big%03d", i)
		mustCreate(t, kc[0], mcsBenchService(name))
		for j := 0; j < perSvc && i*perSvc+j < nSlices; j++ {
			a := fresh()
			want = append(want, a)
			mustCreate(t, kc[0], mcsBenchSlice(name, fmt.Sprintf("%s-%02d", name, j), a))
		}
		mustCreate(t, kc[0], &mcsv1.ServiceExport{ObjectMeta: metav1.ObjectMeta{Namespace: mcsNS, Name: name}})
	}
	created := time.Since(start)
	for i := range nBig {
		lb := topology.ServiceLBName(mcsNS, mcs.DerivedName(fmt.Sprintf("big%03d", i)), "tcp")
		var mine []netip.Addr
		for j := 0; j < perSvc && i*perSvc+j < nSlices; j++ {
			mine = append(mine, want[i*perSvc+j])
		}
		wctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
		_, err := w.waitFor(wctx, func(w *nbWatch) bool { return hasBackends(w, lb, mine) })
		cancel()
		if err != nil {
			t.Fatalf("%s: not all %d backends in c2's NB: %v", lb, len(mine), err)
		}
	}
	lines = append(lines, fmt.Sprintf("%d EndpointSlices in %d more exported Services: created in c1 in %s, all in c2's load balancers %s after the first create",
		nSlices, nBig, created.Round(time.Millisecond), time.Since(start).Round(time.Millisecond)))
	change = change[:0]
	for i := range n {
		svc := fmt.Sprintf("big%03d", i%nBig)
		change = append(change, changeEndpoint(t, ctx, kc[0], w, svc, fmt.Sprintf("%s-%02d", svc, i/nBig%perSvc), fresh()))
	}
	lines = append(lines, fmt.Sprintf("with them in place, an endpoint changed in c1 -> c2's load balancer updated: %s", stats(change)))
	out := strings.Join(lines, "\n") + "\n"
	fmt.Print("\n== " + out)
	if err := os.WriteFile(filepath.Join(outDir(t), "mcs.txt"), []byte(out), 0o644); err != nil {
		t.Error(err)
	}
}

func mcsBenchService(name string) *corev1.Service {
	return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: mcsNS, Name: name}, Spec: corev1.ServiceSpec{
		Ports: []corev1.ServicePort{{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80, TargetPort: intstr.FromInt32(endpointPort)}}}}
}

func mcsBenchSlice(svc, name string, a netip.Addr) *discoveryv1.EndpointSlice {
	sl := benchSlice(svc, []netip.Addr{a})
	sl.Namespace, sl.Name = mcsNS, name
	return sl
}

func mustCreate(t *testing.T, c client.Client, o client.Object) {
	t.Helper()
	if err := c.Create(context.Background(), o); err != nil {
		t.Fatalf("create %T %s: %v", o, o.GetName(), err)
	}
}

// changeEndpoint moves slice's endpoint of exported Service svc to a and returns how long c2's
// load balancer took to list it.
func changeEndpoint(t *testing.T, ctx context.Context, c client.Client, w *nbWatch, svc, slice string, a netip.Addr) time.Duration {
	t.Helper()
	var sl discoveryv1.EndpointSlice
	if err := c.Get(ctx, client.ObjectKey{Namespace: mcsNS, Name: slice}, &sl); err != nil {
		t.Fatal(err)
	}
	sl.Endpoints[0].Addresses = []string{a.String()}
	start := time.Now()
	if err := c.Update(ctx, &sl); err != nil {
		t.Fatal(err)
	}
	return waitBackend(t, ctx, w, svc, a, start)
}

func waitBackend(t *testing.T, ctx context.Context, w *nbWatch, svc string, a netip.Addr, start time.Time) time.Duration {
	t.Helper()
	lb := topology.ServiceLBName(mcsNS, mcs.DerivedName(svc), "tcp")
	wctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	at, err := w.waitFor(wctx, func(w *nbWatch) bool { return hasBackends(w, lb, []netip.Addr{a}) })
	if err != nil {
		t.Fatalf("%s: backend %s not in c2's NB: %v", lb, a, err)
	}
	return at.Sub(start)
}

func hasBackends(w *nbWatch, lb string, addrs []netip.Addr) bool {
	set := w.backends[lb]
	for _, a := range addrs {
		if !set[netip.AddrPortFrom(a, endpointPort).String()] {
			return false
		}
	}
	return true
}

// stats is "p50 X, p99 Y, max Z (n samples)".
func stats(ds []time.Duration) string {
	s := report.Summarize(ds)
	return fmt.Sprintf("p50 %s, p99 %s, max %s (%d samples)", s.P50.Round(time.Millisecond), s.P99.Round(time.Millisecond),
		s.Max.Round(time.Millisecond), s.N)
}
