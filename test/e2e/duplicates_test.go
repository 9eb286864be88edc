package e2e

import (
	"context"
	"errors"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// TestDuplicateIPCheck: the check behind the controller-restart test, without a rig. It must
// fail on a shared address, on a List error and on an empty list, and pass otherwise.
func TestDuplicateIPCheck(t *testing.T) {
	pod := func(name, ip string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name}, Status: corev1.PodStatus{PodIP: ip}}
	}
	ctx := context.Background()
	if n, err := checkNoDuplicateIPs(ctx, fake.NewSimpleClientset(pod("a", "10.16.0.5"), pod("b", "10.16.0.6"), pod("c", ""))); err != nil || n != 2 {
		t.Errorf("distinct addresses: %d checked, err %v; want 2, nil", n, err)
	}
	if _, err := checkNoDuplicateIPs(ctx, fake.NewSimpleClientset(pod("a", "10.16.0.5"), pod("b", "10.16.0.5"))); err == nil || !strings.Contains(err.Error(), "share 10.16.0.5") {
		t.Errorf("shared address: err %v", err)
	}
	broken := fake.NewSimpleClientset(pod("a", "10.16.0.5"), pod("b", "10.16.0.5"))
	broken.PrependReactor("list", "pods", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, errors.New("etcdserver: request timed out")
	})
	if _, err := checkNoDuplicateIPs(ctx, broken); err == nil || !strings.Contains(err.Error(), "timed out") {
		t.Errorf("List error: err %v, want it reported", err)
	}
	if _, err := checkNoDuplicateIPs(ctx, fake.NewSimpleClientset()); err == nil {
		t.Error("no pods listed: the check passed having checked nothing")
	}
}
