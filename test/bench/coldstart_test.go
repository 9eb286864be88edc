//go:build bench

package bench

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kovnv1 "github.com/kovn/kovn/api/v1alpha1"
	"github.com/kovn/kovn/pkg/annotation"
	"github.com/kovn/kovn/test/bench/report"
	"github.com/kovn/kovn/test/rig"
)

// benchLabel marks the baseline's throwaway IP objects.
const benchLabel = "kovn.io/bench"

// coldStart: N unallocated pods exist while kovn-controller is stopped; it starts and every pod
// must get its port. The baseline, measured afterwards in the same run on the same apiserver
// with the controller stopped again (so the two do not share the 2 cores), is the apiserver
// alone accepting what kovn must write per pod.
func coldStart(t *testing.T, sp scaleParams) (time.Duration, []string) {
	r := upRig(t, sp.rigConfig())
	rc := restConfig(t, r)
	kc := kubernetes.NewForConfigOrDie(rc)
	w := watchLSPs(t, r)
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Minute)
	defer cancel()
	waitJoinPorts(t, ctx, w, sp.fakes)
	if err := r.State.StopDaemon("c1", "kovn-controller"); err != nil {
		t.Fatal(err)
	}
	createNamespace(t, kc, "cold")
	if err := (pacer{kc: kc, ns: "cold", n: sp.pods, workers: 8, fakes: sp.fakes}).run(ctx); err != nil {
		t.Fatal(err)
	}
	cold, missing, usage := timeColdStart(t, ctx, r, kc, w, sp)
	fmt.Printf("\n== cold start, %d existing pods on %d fake nodes (%d never got a port)\n", sp.pods, sp.fakes, missing)
	fmt.Printf("kovn-controller start -> all %d LSPs in NB: %.1f s; kovn-controller %s\n", sp.pods, cold.Seconds(), usage)
	if !sp.baseline {
		return cold, []string{fmt.Sprintf("cold start %d pods: %.1f s; %s", sp.pods, cold.Seconds(), usage)}
	}
	if err := r.State.StopDaemon("c1", "kovn-controller"); err != nil {
		t.Fatal(err)
	}
	createNamespace(t, kc, "baseline")
	if err := (pacer{kc: kc, ns: "baseline", n: sp.pods, workers: 8, fakes: sp.fakes}).run(ctx); err != nil {
		t.Fatal(err)
	}
	base := baseline(t, ctx, rc, sp)
	fmt.Printf("apiserver alone, %d IP creates + %d pod annotation merge-patches, one at a time, no client-side QPS limit (as kovn-controller): %.1f s\n",
		sp.pods, sp.pods, base.Seconds())
	fmt.Printf("ratio cold start / apiserver baseline: %.2f (goal <= 2)\n", cold.Seconds()/base.Seconds())
	return cold, []string{fmt.Sprintf("cold start %d pods: %.1f s, apiserver alone %.1f s, ratio %.2f (goal <= 2); %s",
		sp.pods, cold.Seconds(), base.Seconds(), cold.Seconds()/base.Seconds(), usage)}
}

// timeColdStart starts the held controller (with its stale leader Lease freed) and times it
// until every "cold" pod has its port, profiling it meanwhile.
func timeColdStart(t *testing.T, ctx context.Context, r *rig.Rig, kc kubernetes.Interface, w *lspWatch, sp scaleParams) (time.Duration, int, string) {
	// The stopped controller held the leader Lease; a new candidate would wait out its 15 s.
	// A clean shutdown with release-on-cancel would have freed it: do that here.
	_ = kc.CoordinationV1().Leases("kube-system").Delete(ctx, "kovn-controller", metav1.DeleteOptions{})
	start := time.Now()
	pid, err := r.State.StartDaemon(ctx, "c1", "kovn-controller")
	if err != nil {
		t.Fatal(err)
	}
	out := outDir(t)
	stopPerf := func() {}
	if sp.profile {
		stopPerf = perfRecord(t, pid, filepath.Join(out, "kovn-controller-coldstart.perf.data"), filepath.Join(out, "kovn-controller-coldstart-profile.txt"))
	}
	names := make([]string, sp.pods)
	for i := range names {
		names[i] = podName(i) + ".cold"
	}
	wctx, cancel := context.WithTimeout(ctx, time.Duration(envInt("KOVN_BENCH_COLD_TIMEOUT_MIN", 20))*time.Minute)
	defer cancel()
	missing := w.waitAll(wctx, names)
	cold := time.Since(start)
	use, _ := report.ReadProc(pid)
	stopPerf()
	return cold, missing, report.Usage(report.ProcSample{}, use) // a fresh process: all its CPU is the cold start
}

// baseline times the writes kovn-controller makes per pod — one IP object create and one
// annotation merge-patch — issued one at a time (its pod reconciler runs one worker) by a
// controller-runtime client configured as kovn-controller's, on the "baseline" pods.
func baseline(t *testing.T, ctx context.Context, rc *rest.Config, sp scaleParams) time.Duration {
	c := crClient(t, rc)
	start := time.Now()
	for i := 0; i < sp.pods; i++ {
		ip4 := fmt.Sprintf("10.200.%d.%d", i/250, 1+i%250)
		mac := fmt.Sprintf("0a:58:0a:c8:%02x:%02x", i/250, 1+i%250)
		ip := &kovnv1.IP{ObjectMeta: metav1.ObjectMeta{Name: podName(i) + ".baseline", Labels: map[string]string{"kovn.io/subnet": "ovn-default", benchLabel: "baseline"}},
			Spec: kovnv1.IPSpec{PodName: podName(i), Namespace: "baseline", Subnet: "ovn-default", NodeName: rig.FakeNodeName(1, 1+i%sp.fakes), MACAddress: mac, V4IP: ip4}}
		if err := c.Create(ctx, ip); err != nil {
			t.Fatal(err)
		}
		pod := fakePod("baseline", podName(i), rig.FakeNodeName(1, 1+i%sp.fakes))
		before := pod.DeepCopy()
		pod.Annotations = map[string]string{
			annotation.IPAddress: ip4, annotation.MACAddress: mac, annotation.CIDR: "10.16.0.0/16", annotation.Gateway: "10.16.0.1",
			annotation.LogicalSwitch: "ovn-default", annotation.PortName: podName(i) + ".baseline", annotation.Allocated: "true"}
		if err := c.Patch(ctx, pod, client.MergeFrom(before)); err != nil {
			t.Fatal(err)
		}
	}
	return time.Since(start)
}

func crClient(t *testing.T, rc *rest.Config) client.Client {
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	_ = kovnv1.AddToScheme(scheme)
	c, err := client.New(rc, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	return c
}
