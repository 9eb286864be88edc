package underlay

import (
	"reflect"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kovnv1 "github.com/kovn/kovn/api/v1alpha1"
)

func TestDesired(t *testing.T) {
	now := metav1.NewTime(time.Now())
	pns := []kovnv1.ProviderNetwork{
		{ObjectMeta: metav1.ObjectMeta{Name: "phys"}, Spec: kovnv1.ProviderNetworkSpec{DefaultInterface: "eth1",
			CustomInterfaces: []kovnv1.CustomInterface{{Interface: "ens5", Nodes: []string{"n2"}}}, ExcludeNodes: []string{"n3"}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "gone", DeletionTimestamp: &now}, Spec: kovnv1.ProviderNetworkSpec{DefaultInterface: "eth2"}},
		{ObjectMeta: metav1.ObjectMeta{Name: "aaa"}, Spec: kovnv1.ProviderNetworkSpec{DefaultInterface: "eth3"}},
	}
	for node, want := range map[string][]Want{
		"n1": {{"aaa", "eth3"}, {"phys", "eth1"}},
		"n2": {{"aaa", "eth3"}, {"phys", "ens5"}},
		"n3": {{"aaa", "eth3"}},
	} {
		if got := Desired(pns, node); !reflect.DeepEqual(got, want) {
			t.Errorf("%s: %v, want %v", node, got, want)
		}
	}
}

func TestMergeMappings(t *testing.T) {
	for _, c := range []struct {
		cur   string
		want  []Want
		owned []string
		out   string
	}{
		{"", []Want{{"phys", "eth1"}}, nil, "phys:br-phys"},
		{"other:br-x,phys:br-old", []Want{{"phys", "eth1"}}, []string{"phys"}, "other:br-x,phys:br-phys"},
		{"other:br-x,phys:br-phys", nil, []string{"phys"}, "other:br-x"},
		{"weird,other:br-x", []Want{{"a", "eth1"}}, nil, "a:br-a,other:br-x,weird"},
	} {
		if got := MergeMappings(c.cur, c.want, c.owned); got != c.out {
			t.Errorf("MergeMappings(%q, %v, %v) = %q, want %q", c.cur, c.want, c.owned, got, c.out)
		}
	}
}
