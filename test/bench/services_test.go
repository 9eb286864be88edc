//go:build bench

package bench

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ovn-org/libovsdb/client"
	"github.com/ovn-org/libovsdb/model"
	"github.com/ovn-org/libovsdb/ovsdb"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kovn/kovn/pkg/ovn"
	"github.com/kovn/kovn/pkg/ovn/model/nb"
	"github.com/kovn/kovn/test/bench/report"
	"github.com/kovn/kovn/test/rig"
)

// TestServiceScale: issue 15's benchmark, against the real NB (ovsdb-server) of a rig.
//   - programming: KOVN_BENCH_SERVICES (1,000) selector-less Services, each with an
//     EndpointSlice of KOVN_BENCH_ENDPOINTS (10) ready endpoints, created as fast as the API
//     takes them; time until every load balancer is in NB with all its backends, and the NB
//     transactions kovn-controller sent for Service shards (its kovn_nb_transactions_total).
//   - endpoint change: KOVN_BENCH_CHANGES (100) times, one Service's slice gets one endpoint
//     replaced; update call -> the load balancer's new backend in NB, and -> every chassis
//     has the flows (NB_Global nb_cfg bumped once the NB row changed, waited for in hv_cfg).
func TestServiceScale(t *testing.T) {
	n, eps, changes := envInt("KOVN_BENCH_SERVICES", 1000), envInt("KOVN_BENCH_ENDPOINTS", 10), envInt("KOVN_BENCH_CHANGES", 100)
	r := upRig(t, rig.Config{Nodes: 1})
	kc := kubernetes.NewForConfigOrDie(restConfig(t, r))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	nbc := connectLBs(t, r)
	createNamespace(t, kc, "bench")
	tx0 := serviceTransactions(t, r)
	start := time.Now()
	for i := 0; i < n; i++ {
		createBenchService(t, ctx, kc, i, eps)
	}
	created := time.Since(start)
	for !allProgrammed(t, ctx, nbc, n, eps) {
		if ctx.Err() != nil {
			t.Fatalf("load balancers not programmed: %v", ctx.Err())
		}
		time.Sleep(50 * time.Millisecond)
	}
	took := time.Since(start)
	txs := serviceTransactions(t, r) - tx0
	fmt.Printf("services: %d Services x %d endpoints created in %.1fs; all load balancers in NB %.1fs after the first create; %d NB transactions for Service shards (%.2f per Service)\n",
		n, eps, created.Seconds(), took.Seconds(), txs, float64(txs)/float64(n))
	var toNB, toNode []time.Duration
	for k := 0; k < changes; k++ {
		a, b := changeEndpoint(t, ctx, kc, nbc, k%n, eps, k)
		toNB, toNode = append(toNB, a), append(toNode, b)
	}
	sNB, sNode := report.Summarize(toNB), report.Summarize(toNode)
	fmt.Printf("endpoint change with %d Services present (%d changes): -> NB p50 %s p99 %s max %s; -> flows on every chassis (hv_cfg) p50 %s p99 %s max %s\n",
		n, changes, sNB.P50, sNB.P99, sNB.Max, sNode.P50, sNode.P99, sNode.Max)
}

func benchEndpointIP(svc, ep, gen int) string {
	return fmt.Sprintf("10.%d.%d.%d", 100+gen%50, svc/250, svc%250+ep+1)
}

func createBenchService(t *testing.T, ctx context.Context, kc kubernetes.Interface, i, eps int) {
	name := fmt.Sprintf("s%04d", i)
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "bench", Name: name},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 80}}}}
	if _, err := kc.CoreV1().Services("bench").Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := kc.DiscoveryV1().EndpointSlices("bench").Create(ctx, benchSlice(i, eps, 0), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// benchSlice is Service i's slice; generation gen replaces the first endpoint's address.
func benchSlice(i, eps, gen int) *discoveryv1.EndpointSlice {
	name, port, ready := fmt.Sprintf("s%04d", i), int32(8080), true
	sl := &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: "bench", Name: name + "-x",
		Labels: map[string]string{discoveryv1.LabelServiceName: name}},
		AddressType: discoveryv1.AddressTypeIPv4, Ports: []discoveryv1.EndpointPort{{Name: strPtr("http"), Port: &port}}}
	for e := 0; e < eps; e++ {
		ip := fmt.Sprintf("10.%d.%d.%d", 20+e, i/250, i%250+1)
		if e == 0 && gen > 0 {
			ip = benchEndpointIP(i, 0, gen)
		}
		sl.Endpoints = append(sl.Endpoints, discoveryv1.Endpoint{Addresses: []string{ip},
			Conditions: discoveryv1.EndpointConditions{Ready: &ready}})
	}
	return sl
}

func strPtr(s string) *string { return &s }

// changeEndpoint replaces one endpoint of Service i and returns update -> NB and -> hv_cfg.
func changeEndpoint(t *testing.T, ctx context.Context, kc kubernetes.Interface, nbc client.Client, i, eps, k int) (time.Duration, time.Duration) {
	want := benchEndpointIP(i, 0, k+1) + ":8080"
	cur, err := kc.DiscoveryV1().EndpointSlices("bench").Get(ctx, fmt.Sprintf("s%04d-x", i), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	next := benchSlice(i, eps, k+1)
	cur.Endpoints = next.Endpoints
	start := time.Now()
	if _, err := kc.DiscoveryV1().EndpointSlices("bench").Update(ctx, cur, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	lbName := fmt.Sprintf("Service_bench/s%04d_TCP", i)
	for {
		var lbs []nb.LoadBalancer
		_ = nbc.WhereCache(func(lb *nb.LoadBalancer) bool { return lb.Name == lbName }).List(ctx, &lbs)
		if len(lbs) == 1 && strings.Contains(lbs[0].Vips[vipOf(lbs[0])], want) {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("%s never got %s", lbName, want)
		}
		time.Sleep(time.Millisecond)
	}
	toNB := time.Since(start)
	waitHvCfg(t, ctx, nbc)
	return toNB, time.Since(start)
}

func vipOf(lb nb.LoadBalancer) string {
	for k := range lb.Vips {
		return k
	}
	return ""
}

// waitHvCfg bumps nb_cfg and waits until every chassis reports it (hv_cfg): the flows for
// everything in NB up to now are installed on every node.
func waitHvCfg(t *testing.T, ctx context.Context, nbc client.Client) {
	var g []nb.NBGlobal
	if err := nbc.List(ctx, &g); err != nil || len(g) != 1 {
		t.Fatalf("NB_Global: %v", err)
	}
	target := g[0].NbCfg + 1
	ops, err := nbc.Where(&g[0]).Mutate(&g[0], model.Mutation{Field: &g[0].NbCfg, Mutator: ovsdb.MutateOperationAdd, Value: 1})
	if err == nil {
		_, err = ovn.Transact(ctx, nbc, ops)
	}
	if err != nil {
		t.Fatal(err)
	}
	for {
		if err := nbc.List(ctx, &g); err == nil && len(g) == 1 && g[0].HvCfg >= target {
			return
		}
		if ctx.Err() != nil {
			t.Fatal("hv_cfg never caught up")
		}
		time.Sleep(time.Millisecond)
	}
}

// allProgrammed: n load balancers of the bench namespace, each with eps backends.
func allProgrammed(t *testing.T, ctx context.Context, nbc client.Client, n, eps int) bool {
	var lbs []nb.LoadBalancer
	if err := nbc.WhereCache(func(lb *nb.LoadBalancer) bool { return strings.HasPrefix(lb.Name, "Service_bench/") }).List(ctx, &lbs); err != nil {
		t.Fatal(err)
	}
	if len(lbs) < n {
		return false
	}
	for _, lb := range lbs {
		if strings.Count(lb.Vips[vipOf(lb)], ",")+1 != eps {
			return false
		}
	}
	return true
}

func connectLBs(t *testing.T, r *rig.Rig) client.Client {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dbModel, err := nb.FullDatabaseModel()
	if err != nil {
		t.Fatal(err)
	}
	c, err := ovn.Connect(ctx, dbModel, ovn.Config{Endpoints: []string{r.State.Clusters[0].NBAddr}}, &nb.LoadBalancer{}, &nb.NBGlobal{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// serviceTransactions reads kovn-controller's kovn_nb_transactions_total{owner_type="Service"}
// from its metrics endpoint on the control plane namespace's loopback.
func serviceTransactions(t *testing.T, r *rig.Rig) int {
	cfg := r.State.Config
	url := fmt.Sprintf("http://127.0.0.1:%d/metrics", rig.PortControllerMetrics)
	out, err := exec.Command("ip", "netns", "exec", cfg.ControlPlaneNS(1), filepath.Join(cfg.KovnBinDir, "kovn-testbox"), "get", url).CombinedOutput()
	if err != nil {
		t.Fatalf("controller metrics: %v %s", err, out)
	}
	for _, l := range strings.Split(string(out), "\n") {
		if strings.HasPrefix(l, `kovn_nb_transactions_total{owner_type="Service"} `) {
			v, _ := strconv.ParseFloat(strings.Fields(l)[1], 64)
			return int(v)
		}
	}
	return 0
}
