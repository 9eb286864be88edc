package nodecond

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/event"

	kovnv1 "github.com/kovn/kovn/api/v1alpha1"
)

func TestIgnoreHeartbeats(t *testing.T) {
	t0 := metav1.NewTime(time.Now().Truncate(time.Second))
	old := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", ResourceVersion: "1"}, Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{
		{Type: corev1.NodeReady, Status: corev1.ConditionTrue, LastHeartbeatTime: t0},
		{Type: kovnv1.NodeConditionNetworkReady, Status: corev1.ConditionTrue, LastHeartbeatTime: t0}}}}
	passes := func(change func(*corev1.Node)) bool {
		n := old.DeepCopy()
		n.ResourceVersion = "2"
		change(n)
		return IgnoreHeartbeats.Update(event.UpdateEvent{ObjectOld: old, ObjectNew: n})
	}
	later := metav1.NewTime(t0.Add(10 * time.Second))
	if passes(func(n *corev1.Node) { n.Status.Conditions[1].LastHeartbeatTime = later }) {
		t.Error("kovn's heartbeat alone woke the controllers")
	}
	for name, change := range map[string]func(*corev1.Node){
		"kovn's condition goes False": func(n *corev1.Node) { n.Status.Conditions[1].Status = corev1.ConditionFalse },
		"the kubelet's heartbeat":     func(n *corev1.Node) { n.Status.Conditions[0].LastHeartbeatTime = later },
		"an annotation":               func(n *corev1.Node) { n.Annotations = map[string]string{"a": "b"} },
		"an address":                  func(n *corev1.Node) { n.Status.Addresses = []corev1.NodeAddress{{Address: "10.0.0.1"}} },
	} {
		if !passes(change) {
			t.Errorf("%s was dropped", name)
		}
	}
}
