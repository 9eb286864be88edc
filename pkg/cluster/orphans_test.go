package cluster

import (
	"context"
	"net/netip"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	kovnv1 "github.com/kovn/kovn/api/v1alpha1"
	"github.com/kovn/kovn/pkg/ipam"
)

func TestCollectOrphansReleasesOnlyGonePods(t *testing.T) {
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	_ = kovnv1.AddToScheme(scheme)
	ipObj := func(pod, addr string) *kovnv1.IP {
		return &kovnv1.IP{ObjectMeta: metav1.ObjectMeta{Name: IPObjectName("default", pod)},
			Spec: kovnv1.IPSpec{PodName: pod, Namespace: "default", Subnet: "ovn-default", V4IP: addr}}
	}
	alive := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "alive"}}
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(alive, ipObj("alive", "10.16.0.2"), ipObj("gone", "10.16.0.3")).Build()
	st := NewState(DefaultOptions())
	if err := st.IPAM.AddOrUpdateSubnet("ovn-default", []netip.Prefix{netip.MustParsePrefix("10.16.0.0/16")},
		[]netip.Addr{netip.MustParseAddr("10.16.0.1")}, nil); err != nil {
		t.Fatal(err)
	}
	for pod, addr := range map[string]string{"alive": "10.16.0.2", "gone": "10.16.0.3"} {
		if err := st.IPAM.Restore(podOwner("default", pod), ipam.Allocation{Subnet: "ovn-default", IPs: []netip.Addr{netip.MustParseAddr(addr)}}); err != nil {
			t.Fatal(err)
		}
	}
	r := &PodReconciler{Client: c, State: st}
	if err := r.CollectOrphans(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, held := st.IPAM.Lookup(podOwner("default", "gone")); held {
		t.Error("address of the deleted pod is still held")
	}
	if _, held := st.IPAM.Lookup(podOwner("default", "alive")); !held {
		t.Error("address of the running pod was released")
	}
	var ip kovnv1.IP
	if err := c.Get(context.Background(), types.NamespacedName{Name: IPObjectName("default", "gone")}, &ip); err == nil {
		t.Error("IP object of the deleted pod survived")
	}
	if err := c.Get(context.Background(), types.NamespacedName{Name: IPObjectName("default", "alive")}, &ip); err != nil {
		t.Errorf("IP object of the running pod: %v", err)
	}
}
