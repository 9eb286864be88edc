//go:build bench

// Package bench holds benchmarks that run on a real rig and print figures. They assert
// nothing about speed; run them on demand with `make bench`.
package bench

import (
	"context"
	"fmt"
	"os"
	"sort"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/kovn/kovn/test/rig"
)

// TestPodStartupLatency creates 50 pods at once on a 1x2 rig with kovn and prints the
// create -> Running latency distribution (Running means kovn-cni finished: veth, OVS port,
// OVN flows installed).
func TestPodStartupLatency(t *testing.T) {
	const pods = 50
	dir, err := os.MkdirTemp("", "kovn-bench-")
	if err != nil {
		t.Fatal(err)
	}
	cfg := rig.Config{Dir: dir, Clusters: 1, Nodes: 2, Kovn: true, KovnBinDir: os.Getenv("KOVN_BIN_DIR")}
	r, err := rig.Up(context.Background(), cfg)
	defer func() {
		if err := rig.Down(dir, false); err != nil {
			t.Errorf("rig down: %v", err)
		}
	}()
	if err != nil {
		t.Fatal(err)
	}
	kc, err := r.State.Kube("c1")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	w, err := kc.CoreV1().Pods("default").Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
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
			n := len(running)
			mu.Unlock()
			if n == pods {
				return
			}
		}
	}()
	start := time.Now()
	grace := int64(0)
	for i := 0; i < pods; i++ {
		name := fmt.Sprintf("bench-%02d", i)
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.PodSpec{
			NodeName: rig.NodeName(1, 1+i%2), TerminationGracePeriodSeconds: &grace,
			Containers: []corev1.Container{{Name: "c", Image: rig.TestboxImage, ImagePullPolicy: corev1.PullNever, Args: []string{"sleep"}}}}}
		mu.Lock()
		created[name] = time.Now()
		mu.Unlock()
		if _, err := kc.CoreV1().Pods("default").Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case <-done:
	case <-ctx.Done():
		t.Fatalf("only %d of %d pods Running", len(running), pods)
	}
	total := time.Since(start)
	var ds []time.Duration
	for _, d := range running {
		ds = append(ds, d)
	}
	sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
	q := func(f float64) time.Duration { return ds[int(f*float64(len(ds)-1))].Round(time.Millisecond) }
	fmt.Printf("pod create -> Running, %d pods on 2 nodes created at once: p50 %s  p90 %s  p99 %s  max %s  (all Running after %s)\n",
		pods, q(0.50), q(0.90), q(0.99), ds[len(ds)-1].Round(time.Millisecond), total.Round(time.Millisecond))
}
