// Package nodecond keeps kovn-daemon's node heartbeat from waking kovn's controllers: the
// KovnNetworkReady and KovnTunnelsUp conditions are re-written every
// kovnv1.NodeConditionHeartbeat, and a Node update that changes nothing but that heartbeat is no
// change to anything they read.
package nodecond

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	kovnv1 "github.com/kovn/kovn/api/v1alpha1"
)

// HeartbeatOnly reports whether updated differs from old only in the heartbeat time of
// kovn's conditions (and the object's version and managed fields).
func HeartbeatOnly(old, updated *corev1.Node) bool {
	o, n := old.DeepCopy(), updated.DeepCopy()
	for _, x := range []*corev1.Node{o, n} {
		x.ResourceVersion, x.ManagedFields = "", nil
		for i := range x.Status.Conditions {
			if t := x.Status.Conditions[i].Type; t == kovnv1.NodeConditionNetworkReady || t == kovnv1.NodeConditionTunnelsUp {
				x.Status.Conditions[i].LastHeartbeatTime = metav1.Time{}
			}
		}
	}
	return equality.Semantic.DeepEqual(o, n)
}

// IgnoreHeartbeats drops Node updates that are only kovn-daemon's heartbeat.
var IgnoreHeartbeats = predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
	o, ok1 := e.ObjectOld.(*corev1.Node)
	n, ok2 := e.ObjectNew.(*corev1.Node)
	return !ok1 || !ok2 || !HeartbeatOnly(o, n)
}}
