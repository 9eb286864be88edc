package rig

import (
	"fmt"
	"net/netip"
	"time"

	coordv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Fake nodes are Node objects with nothing behind them: no kubelet, OVS or containerd. They
// let a 2-core host show kovn-controller a cluster of hundreds of nodes. The rig keeps them
// alive the way kubelets keep real nodes alive — a Ready condition plus a Lease in
// kube-node-lease renewed every few seconds — so kube-controller-manager's node lifecycle
// neither marks them NotReady nor taints them, and its settings stay those of the normal rig.

// MaxFakeNodes bounds FakeNodes per cluster (addresses: 4096 per cluster in 198.18.0.0/15).
const MaxFakeNodes = 4000

// FakeNodeLabel marks fake nodes; FakeNodeTaint keeps the scheduler from placing real pods
// there (pods for scale tests name their node in spec.nodeName and bypass the scheduler).
const (
	FakeNodeLabel = "kovn.io/fake-node"
	FakeNodeTaint = "kovn.io/fake-node"
)

// fakeLeaseSeconds is the lease duration a kubelet uses; fakeRenewInterval is how often the
// rig renews it (kubelets renew at a quarter of the duration, 10 s).
const (
	fakeLeaseSeconds  = 40
	fakeRenewInterval = 10 * time.Second
)

// FakeNodeName is fake node i (1-based) of cluster cl: "c1-f7".
func FakeNodeName(cl, i int) string { return fmt.Sprintf("c%d-f%d", cl, i) }

// FakeNodeIP is fake node i's InternalIP, in the benchmarking range 198.18.0.0/15 (RFC 2544):
// never routed, never configured on any interface, only reported.
func FakeNodeIP(cl, i int) netip.Addr {
	n := uint32(198)<<24 | uint32(18)<<16 | uint32(cl)<<12 | uint32(i)
	return netip.AddrFrom4([4]byte{byte(n >> 24), byte(n >> 16), byte(n >> 8), byte(n)})
}

// FakeNode is the Node object of fake node i of cluster cl, as a kubelet would register it.
func FakeNode(cl, i int, now time.Time) *corev1.Node {
	name := FakeNodeName(cl, i)
	t := metav1.NewTime(now)
	cond := func(typ corev1.NodeConditionType, st corev1.ConditionStatus, reason string) corev1.NodeCondition {
		return corev1.NodeCondition{Type: typ, Status: st, Reason: reason, LastHeartbeatTime: t, LastTransitionTime: t}
	}
	res := corev1.ResourceList{
		corev1.ResourceCPU: resource.MustParse("8"), corev1.ResourceMemory: resource.MustParse("32Gi"),
		corev1.ResourcePods: resource.MustParse("250"),
	}
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{
			"kubernetes.io/hostname": name, "kubernetes.io/os": "linux", FakeNodeLabel: "true"}},
		Spec: corev1.NodeSpec{Taints: []corev1.Taint{{Key: FakeNodeTaint, Value: "true", Effect: corev1.TaintEffectNoSchedule}}},
		Status: corev1.NodeStatus{
			Capacity: res, Allocatable: res,
			Conditions: []corev1.NodeCondition{
				cond(corev1.NodeReady, corev1.ConditionTrue, "KubeletReady"),
				cond(corev1.NodeMemoryPressure, corev1.ConditionFalse, "KubeletHasSufficientMemory"),
				cond(corev1.NodeDiskPressure, corev1.ConditionFalse, "KubeletHasNoDiskPressure"),
				cond(corev1.NodePIDPressure, corev1.ConditionFalse, "KubeletHasSufficientPID"),
			},
			Addresses: []corev1.NodeAddress{
				{Type: corev1.NodeInternalIP, Address: FakeNodeIP(cl, i).String()},
				{Type: corev1.NodeHostName, Address: name},
			},
			NodeInfo: corev1.NodeSystemInfo{KubeletVersion: K8sVersion, OperatingSystem: "linux", Architecture: "amd64"},
		},
	}
}

// FakeLease is the node heartbeat of a fake node, renewed at now.
func FakeLease(node string, now time.Time) *coordv1.Lease {
	d := int32(fakeLeaseSeconds)
	t := metav1.NewMicroTime(now)
	return &coordv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: node, Namespace: corev1.NamespaceNodeLease},
		Spec:       coordv1.LeaseSpec{HolderIdentity: &node, LeaseDurationSeconds: &d, RenewTime: &t},
	}
}
