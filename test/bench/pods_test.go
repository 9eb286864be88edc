//go:build bench

package bench

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kovn/kovn/test/rig"
)

// fakePod is a pod bound to a fake node: it bypasses the scheduler and, with no kubelet
// there, never runs — kovn still allocates it and creates its switch port.
func fakePod(ns, name, node string) *corev1.Pod {
	grace := int64(0)
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Spec: corev1.PodSpec{
		NodeName: node, TerminationGracePeriodSeconds: &grace,
		Tolerations: []corev1.Toleration{{Key: rig.FakeNodeTaint, Operator: corev1.TolerationOpExists}},
		Containers:  []corev1.Container{{Name: "c", Image: rig.TestboxImage, ImagePullPolicy: corev1.PullNever, Args: []string{"sleep"}}}}}
}

func podName(i int) string { return fmt.Sprintf("p%05d", i) }

func createNamespace(t *testing.T, kc kubernetes.Interface, ns string) {
	t.Helper()
	_, err := kc.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
}

// pacer creates n pods, rate per second (0: as fast as workers go), spread round-robin over
// fake nodes. before(i) runs just before pod i's Create call (timestamps are taken there).
type pacer struct {
	kc      kubernetes.Interface
	ns      string
	n, rate int
	workers int
	fakes   int
	before  func(i int)
}

func (p pacer) run(ctx context.Context) error {
	idx := make(chan int, 1000)
	go func() {
		defer close(idx)
		tick := 100 * time.Millisecond // batches of rate/10 keep the rate steady at 10 Hz
		batch := max(1, p.rate/10)
		for i := 0; i < p.n; {
			start := time.Now()
			for j := 0; j < batch && i < p.n; j, i = j+1, i+1 {
				idx <- i
			}
			if p.rate > 0 {
				time.Sleep(tick - time.Since(start))
			}
		}
	}()
	var wg sync.WaitGroup
	errs := make(chan error, p.workers)
	for w := 0; w < p.workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range idx {
				pod := fakePod(p.ns, podName(i), rig.FakeNodeName(1, 1+i%p.fakes))
				if p.before != nil {
					p.before(i)
				}
				if _, err := p.kc.CoreV1().Pods(p.ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
					errs <- fmt.Errorf("create %s: %w", pod.Name, err)
					for range idx { // drain so the feeder ends
					}
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	return <-errs
}

// perfRecord profiles pid with perf (call graphs, 49 Hz) until the returned stop is called,
// then writes the report's top symbols to txt. Go binaries keep frame pointers and symbols,
// so this profiles kovn-controller black-box, without a pprof endpoint.
func perfRecord(t *testing.T, pid int, data, txt string) (stop func()) {
	cmd := exec.Command("perf", "record", "-F", "49", "-g", "-p", fmt.Sprint(pid), "-o", data)
	cmd.Stdout, cmd.Stderr = nil, nil
	if err := cmd.Start(); err != nil {
		t.Logf("perf not available, no profile: %v", err)
		return func() {}
	}
	return func() {
		_ = cmd.Process.Signal(syscall.SIGINT)
		_ = cmd.Wait()
		// Cumulative first (which reconciler, which call costs), then self time (hot leaves).
		var text []byte
		for _, mode := range []string{"--children", "--no-children"} {
			out, err := exec.Command("perf", "report", "-i", data, "--stdio", mode, "--sort", "symbol",
				"--percent-limit", "1", "-g", "none").CombinedOutput()
			if err != nil {
				t.Logf("perf report: %v", err)
			}
			text = append(append(text, "## perf report "+mode+"\n"...), out...)
		}
		_ = os.WriteFile(txt, text, 0o644)
	}
}
