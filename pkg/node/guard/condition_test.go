package guard

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

func TestNetworkCondition(t *testing.T) {
	up := nodeReading{ovsUp: true, ovnControllerUp: true, plumbed: true, ovnControllerPidfile: "/run/ovn/ovn-controller.pid"}
	for _, tc := range []struct {
		name   string
		change func(*nodeReading)
		status corev1.ConditionStatus
		reason string
		says   string
	}{
		{"all up", func(*nodeReading) {}, corev1.ConditionTrue, ReasonNodeNetworkReady, "up"},
		{"OVS down (ovn-controller too)", func(r *nodeReading) { r.ovsUp, r.ovnControllerUp = false, false }, corev1.ConditionFalse, ReasonOVSDown, "OVS is down"},
		{"ovn-controller down", func(r *nodeReading) { r.ovnControllerUp = false }, corev1.ConditionFalse, ReasonOVNControllerDown, "/run/ovn/ovn-controller.pid"},
		{"not plumbed", func(r *nodeReading) { r.plumbed = false }, corev1.ConditionFalse, ReasonNotPlumbed, "CNI config"},
	} {
		r := up
		tc.change(&r)
		c := networkCondition(r, metav1.Now(), nil)
		if c.Type != ConditionNetworkReady || c.Status != tc.status || c.Reason != tc.reason || !strings.Contains(c.Message, tc.says) {
			t.Errorf("%s: %+v", tc.name, c)
		}
	}
	// The transition time moves only with the status.
	then := metav1.NewTime(time.Now().Add(-time.Hour).Truncate(time.Second))
	prev := &corev1.NodeCondition{Type: ConditionNetworkReady, Status: corev1.ConditionTrue, LastTransitionTime: then}
	now := metav1.Now()
	if c := networkCondition(up, now, prev); !c.LastTransitionTime.Equal(&then) || !c.LastHeartbeatTime.Equal(&now) {
		t.Errorf("same status: transition %v heartbeat %v", c.LastTransitionTime, c.LastHeartbeatTime)
	}
	down := up
	down.ovnControllerUp = false
	if c := networkCondition(down, now, prev); !c.LastTransitionTime.Equal(&now) {
		t.Errorf("status changed: transition %v, want now", c.LastTransitionTime)
	}
}

// The tunnels condition: up only when every session is; unknown when the database was not read;
// the transition time moves only with the status.
func TestTunnelsCondition(t *testing.T) {
	for _, tc := range []struct {
		name   string
		r      nodeReading
		status corev1.ConditionStatus
		reason string
		msg    string
	}{
		{"all up", nodeReading{tunnelsRead: true, bfdSessions: 2}, corev1.ConditionTrue, "BFDUp", "all 2 BFD sessions"},
		{"no sessions", nodeReading{tunnelsRead: true}, corev1.ConditionTrue, "BFDUp", "all 0"},
		{"one down", nodeReading{tunnelsRead: true, bfdSessions: 2, bfdNotUp: "172.30.1.12"}, corev1.ConditionFalse, "BFDDown", "toward 172.30.1.12"},
		{"unread", nodeReading{}, corev1.ConditionUnknown, "TunnelsUnread", "does not answer"},
	} {
		c := tunnelsCondition(tc.r, metav1.Now(), nil)
		if c.Type != ConditionTunnelsUp || c.Status != tc.status || c.Reason != tc.reason || !strings.Contains(c.Message, tc.msg) {
			t.Errorf("%s: %s %s %s %q", tc.name, c.Type, c.Status, c.Reason, c.Message)
		}
	}
	then, now := metav1.NewTime(time.Now().Add(-time.Hour)), metav1.Now()
	prev := &corev1.NodeCondition{Type: ConditionTunnelsUp, Status: corev1.ConditionTrue, LastTransitionTime: then}
	if c := tunnelsCondition(nodeReading{tunnelsRead: true}, now, prev); !c.LastTransitionTime.Equal(&then) {
		t.Errorf("same status: transition moved to %v", c.LastTransitionTime)
	}
	if c := tunnelsCondition(nodeReading{tunnelsRead: true, bfdNotUp: "x"}, now, prev); !c.LastTransitionTime.Equal(&now) {
		t.Errorf("status changed: transition %v, want now", c.LastTransitionTime)
	}
}

// The condition is merged into the node's status by type: the kubelet's conditions stay.
func TestNodeConditionWriteKeepsKubeletConditions(t *testing.T) {
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}, Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{
		{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady"}}}}
	c := fake.NewClientBuilder().WithScheme(scheme.Scheme).WithObjects(node).WithStatusSubresource(node).Build()
	rep := &NodeConditionReporter{Client: c, NodeName: "n1"}
	for _, r := range []nodeReading{{ovsUp: true}, {ovsUp: true, ovnControllerUp: true, plumbed: true, tunnelsRead: true, bfdNotUp: "172.30.1.12"}} {
		if err := rep.write(context.Background(), r); err != nil {
			t.Fatal(err)
		}
	}
	var got corev1.Node
	if err := c.Get(context.Background(), k8stypes.NamespacedName{Name: "n1"}, &got); err != nil {
		t.Fatal(err)
	}
	var types []string
	for _, c := range got.Status.Conditions {
		types = append(types, string(c.Type)+"="+string(c.Status)+"/"+c.Reason)
	}
	slices.Sort(types)
	if want := "KovnNetworkReady=True/Ready KovnTunnelsUp=False/BFDDown Ready=True/KubeletReady"; strings.Join(types, " ") != want {
		t.Errorf("conditions %v, want %s", types, want)
	}
}
