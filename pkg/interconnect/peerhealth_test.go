package interconnect

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kovn/kovn/pkg/annotation"
)

func probingNode(name, peers, down string) corev1.Node {
	a := map[string]string{annotation.ICPeerGateways: peers}
	if down != "" {
		a[annotation.ICPeersDown] = down
	}
	return corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: a}}
}

// An AZ is unreachable when every gateway node that probes it reports it down; a node that
// does not probe it, or a report naming an AZ the node does not probe, does not count.
func TestUnreachableAZs(t *testing.T) {
	peers := "az2=172.30.2.11,172.30.2.12;az3=172.30.3.11"
	nodes := []corev1.Node{
		probingNode("n1", peers, "az2,az3"),
		probingNode("n2", peers, "az2"),
		probingNode("n3", "", "az3"),
		{ObjectMeta: metav1.ObjectMeta{Name: "n4"}},
	}
	got := unreachableAZs(nodes)
	if !got["az2"] || got["az3"] || len(got) != 1 {
		t.Fatalf("unreachable %v, want az2 alone (az3 still reached from n2)", got)
	}
	nodes[0].Annotations[annotation.ICPeerGateways] = "az3=172.30.3.11" // n1 no longer probes az2
	nodes[0].Annotations[annotation.ICPeersDown] = "az2"
	if got := unreachableAZs(nodes); !got["az2"] {
		t.Fatalf("az2 down on n2, the one node probing it: unreachable %v", got)
	}
	nodes[1].Annotations[annotation.ICPeersDown] = ""
	if got := unreachableAZs(nodes); len(got) != 0 {
		t.Fatalf("no report: unreachable %v", got)
	}
}

func TestPeerHealthSet(t *testing.T) {
	h := NewPeerHealth()
	calls := 0
	h.OnChange(func() { calls++ })
	lost, back := h.set(map[string]bool{"az2": true})
	if !slices.Equal(lost, []string{"az2"}) || len(back) != 0 || !h.Unreachable("az2") || calls != 1 {
		t.Fatalf("lost %v back %v calls %d", lost, back, calls)
	}
	if lost, back = h.set(map[string]bool{"az2": true}); len(lost)+len(back) != 0 || calls != 1 {
		t.Fatalf("unchanged: lost %v back %v calls %d", lost, back, calls)
	}
	if lost, back = h.set(map[string]bool{"az3": true}); !slices.Equal(lost, []string{"az3"}) || !slices.Equal(back, []string{"az2"}) || calls != 2 {
		t.Fatalf("lost %v back %v calls %d", lost, back, calls)
	}
}
