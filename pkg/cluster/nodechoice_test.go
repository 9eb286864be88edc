package cluster

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestChooseNodes(t *testing.T) {
	nodes := []corev1.Node{
		{ObjectMeta: metav1.ObjectMeta{Name: "n3", Labels: map[string]string{"gw": "yes"}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "n1", Labels: map[string]string{"gw": "yes"}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "n2"}},
	}
	sel := &metav1.LabelSelector{MatchLabels: map[string]string{"gw": "yes"}}
	if got, _ := ChooseNodes(nil, sel, nodes); !slices.Equal(got, []string{"n1", "n3"}) {
		t.Errorf("selector: %v", got)
	}
	if got, _ := ChooseNodes([]string{"n2", "gone", "n1", "n2"}, sel, nodes); !slices.Equal(got, []string{"n2", "n1"}) {
		t.Errorf("list (wins over the selector, keeps order, drops missing and repeated): %v", got)
	}
	if got, _ := ChooseNodes(nil, nil, nodes); !slices.Equal(got, []string{"n1", "n2", "n3"}) {
		t.Errorf("neither: %v", got)
	}
	bad := &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "gw", Operator: "Sideways"}}}
	if _, err := ChooseNodes(nil, bad, nodes); err == nil {
		t.Error("an invalid selector must be an error")
	}
}
