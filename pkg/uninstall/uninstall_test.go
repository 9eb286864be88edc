package uninstall

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

func pod(name, app, node string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: name, Labels: map[string]string{"app": app}},
		Spec: corev1.PodSpec{NodeName: node}}
}

func nodeObj(name string) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}
}

// cluster is a fake API where deleting a DaemonSet deletes its pods (as the garbage collector
// would) and a "kubelet" finishes each cleanup pod as outcome says.
func cluster(t *testing.T, outcome map[string]corev1.PodStatus) (*fake.Clientset, *[]string) {
	ds := &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "kovn-daemon"}}
	kc := fake.NewSimpleClientset(ds, pod("kovn-daemon-a", "kovn-daemon", "n1"), pod("kovn-daemon-b", "kovn-daemon", "n2"),
		nodeObj("n1"), nodeObj("n2"), nodeObj("n3"))
	var mu sync.Mutex
	var created []string
	kc.PrependReactor("delete", "daemonsets", func(a k8stesting.Action) (bool, runtime.Object, error) {
		go func() {
			for _, p := range []string{"kovn-daemon-a", "kovn-daemon-b"} {
				_ = kc.CoreV1().Pods("kube-system").Delete(context.Background(), p, metav1.DeleteOptions{})
			}
		}()
		return false, nil, nil
	})
	kc.PrependReactor("create", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		p := a.(k8stesting.CreateAction).GetObject().(*corev1.Pod)
		mu.Lock()
		created = append(created, p.Spec.NodeName)
		mu.Unlock()
		if st, ok := outcome[p.Spec.NodeName]; ok {
			p.Status = st
		}
		return false, nil, nil
	})
	return kc, &created
}

func failedWith(msg string) corev1.PodStatus {
	return corev1.PodStatus{Phase: corev1.PodFailed, ContainerStatuses: []corev1.ContainerStatus{{
		State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1, Message: msg}}}}}
}

func TestRunCleansEveryNodeAndNamesFailures(t *testing.T) {
	kc, created := cluster(t, map[string]corev1.PodStatus{
		"n1": {Phase: corev1.PodSucceeded},
		"n2": failedWith("FAILED iptables chain KOVN-SNAT: permission denied"),
		// n3 never finishes: its node is down.
	})
	tmpl := &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "cleanup", Image: "kovn"}}}}
	var log strings.Builder
	err := Run(context.Background(), kc, Options{Namespace: "kube-system", Stop: []Workload{{"DaemonSet", "kovn-daemon"}, {"Deployment", "kovn-controller"}},
		CleanupPod: tmpl, Timeout: time.Second, Poll: 20 * time.Millisecond, Log: &log})
	if err == nil {
		t.Fatal("want an error for n2 and n3")
	}
	for _, want := range []string{"node n2: cleanup failed: exit code 1: FAILED iptables chain KOVN-SNAT: permission denied",
		"node n3: its cleanup pod did not finish"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
	if strings.Contains(err.Error(), "node n1") || !strings.Contains(log.String(), "node n1 is clean") {
		t.Errorf("n1 was clean: error %q, log %q", err, log.String())
	}
	if len(*created) != 3 {
		t.Errorf("cleanup pods created on %v, want every node", *created)
	}
	// The agents went first, and no cleanup pod is left behind.
	if _, err := kc.AppsV1().DaemonSets("kube-system").Get(context.Background(), "kovn-daemon", metav1.GetOptions{}); err == nil {
		t.Error("kovn-daemon DaemonSet not deleted")
	}
	pods, _ := kc.CoreV1().Pods("kube-system").List(context.Background(), metav1.ListOptions{})
	if len(pods.Items) != 0 {
		t.Errorf("pods left: %d", len(pods.Items))
	}
}

func TestRunWaitsForTheAgents(t *testing.T) {
	kc := fake.NewSimpleClientset(pod("kovn-controller-x", "kovn-controller", "n1"), nodeObj("n1"))
	err := Run(context.Background(), kc, Options{Namespace: "kube-system", Stop: []Workload{{"Deployment", "kovn-controller"}},
		CleanupPod: &corev1.Pod{}, Timeout: 100 * time.Millisecond, Poll: 10 * time.Millisecond})
	if err == nil || !strings.Contains(err.Error(), "kovn's agents still running after 100ms: kovn-controller-x") {
		t.Fatalf("got %v, want the agent's pod named", err)
	}
}

func TestParseWorkloadAndPodName(t *testing.T) {
	if w, err := ParseWorkload("daemonset/kovn-ovs"); err != nil || w != (Workload{"DaemonSet", "kovn-ovs"}) {
		t.Errorf("got %v %v", w, err)
	}
	for _, bad := range []string{"kovn", "statefulset/x", "deployment/"} {
		if _, err := ParseWorkload(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
	if n := CleanupPodName(strings.Repeat("a", 70)); len(n) > 63 {
		t.Errorf("pod name %d characters", len(n))
	}
}

// TestRunStopsPodNetworkWorkloadsFirst: a StopFirst workload's pods (kovn-pinger, on kovn's
// own pod network) must be gone before kovn-daemon, which tears their sandboxes down, is
// deleted.
func TestRunStopsPodNetworkWorkloadsFirst(t *testing.T) {
	kc := fake.NewSimpleClientset(pod("kovn-pinger-x", "kovn-pinger", "n1"), nodeObj("n1"))
	var order []string
	kc.PrependReactor("delete", "daemonsets", func(a k8stesting.Action) (bool, runtime.Object, error) {
		name := a.(k8stesting.DeleteAction).GetName()
		// The reactor runs under the fake's lock: read its tracker, not the clientset.
		_, gone := kc.Tracker().Get(corev1.SchemeGroupVersion.WithResource("pods"), "kube-system", "kovn-pinger-x")
		order = append(order, fmt.Sprintf("%s (pinger pod there: %t)", name, gone == nil))
		if name == "kovn-pinger" {
			go func() {
				time.Sleep(50 * time.Millisecond)
				_ = kc.CoreV1().Pods("kube-system").Delete(context.Background(), "kovn-pinger-x", metav1.DeleteOptions{})
			}()
		}
		return true, nil, nil
	})
	err := Run(context.Background(), kc, Options{Namespace: "kube-system", StopFirst: []Workload{{"DaemonSet", "kovn-pinger"}},
		Stop: []Workload{{"DaemonSet", "kovn-daemon"}}, CleanupPod: &corev1.Pod{}, Timeout: 200 * time.Millisecond, Poll: 10 * time.Millisecond})
	_ = err // the cleanup pod never finishes here; only the order matters
	if want := []string{"kovn-pinger (pinger pod there: true)", "kovn-daemon (pinger pod there: false)"}; !slices.Equal(order, want) {
		t.Errorf("deleted %v, want %v", order, want)
	}
}
