//go:build bench

// Package bench holds benchmarks that run on a real rig and print figures. They assert
// nothing about speed; run them on demand with `make bench`.
package bench

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"

	"github.com/kovn/kovn/test/bench/report"
	"github.com/kovn/kovn/test/rig"
)

// TestPodStartupLatency creates 50 pods on two kovn nodes, then 50 on two nodes of the same
// rig running the plain bridge + host-local CNI, and prints both create -> Running
// distributions and the p99 ratio (goal: kovn adds < 10 % at p99). Running means the CNI
// finished: for kovn a veth, an OVS port and OVN flows installed.
func TestPodStartupLatency(t *testing.T) {
	const pods = 50
	r := upRig(t, rig.Config{Nodes: 4, BridgeNodes: 2})
	kc := kubernetes.NewForConfigOrDie(restConfig(t, r))
	pid, err := r.State.DaemonPid("c1", "kovn-controller")
	if err != nil {
		t.Fatal(err)
	}
	before, _ := report.ReadProc(pid)
	kovn := startupLatency(t, kc, "kovn", pods, []string{rig.NodeName(1, 1), rig.NodeName(1, 2)})
	after, _ := report.ReadProc(pid)
	bridge := startupLatency(t, kc, "bridge", pods, []string{rig.NodeName(1, 3), rig.NodeName(1, 4)})
	k, b := report.Summarize(kovn), report.Summarize(bridge)
	fmt.Printf("\n== pod create -> Running, %d pods created at once on 2 nodes each, same rig\n", pods)
	fmt.Printf("%-22s %s\n", "kovn:", k)
	fmt.Printf("%-22s %s\n", "bridge + host-local:", b)
	fmt.Printf("p99 kovn / bridge: %.2f (goal < 1.10); p50 ratio %.2f\n", float64(k.P99)/float64(b.P99), float64(k.P50)/float64(b.P50))
	fmt.Printf("kovn-controller during the kovn pods: %s\n", report.Usage(before, after))
}

// startupLatency creates n pods at once, round-robin on nodes, in a namespace of their own,
// and returns each pod's create -> Running time.
func startupLatency(t *testing.T, kc kubernetes.Interface, ns string, n int, nodes []string) []time.Duration {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	createNamespace(t, kc, ns)
	w, err := kc.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	var mu sync.Mutex
	created := map[string]time.Time{}
	running := map[string]time.Duration{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev := range w.ResultChan() {
			p, ok := ev.Object.(*corev1.Pod)
			if !ok || ev.Type == watch.Deleted || p.Status.Phase != corev1.PodRunning {
				continue
			}
			mu.Lock()
			if c, ok := created[p.Name]; ok {
				if _, seen := running[p.Name]; !seen {
					running[p.Name] = time.Since(c)
				}
			}
			all := len(running) == n
			mu.Unlock()
			if all {
				return
			}
		}
	}()
	for i := 0; i < n; i++ {
		p := fakePod(ns, fmt.Sprintf("bench-%02d", i), nodes[i%len(nodes)])
		p.Spec.Tolerations = nil
		mu.Lock()
		created[p.Name] = time.Now()
		mu.Unlock()
		if _, err := kc.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case <-done:
	case <-ctx.Done():
		t.Fatalf("%s: only %d of %d pods Running", ns, len(running), n)
	}
	mu.Lock()
	defer mu.Unlock()
	var ds []time.Duration
	for _, d := range running {
		ds = append(ds, d)
	}
	return ds
}
