package cluster

import (
	"slices"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// ChooseNodes resolves the "nodes by preference, else by label" choice that gateways make
// (an InterConnect's gatewayNodes/gatewaySelector, a Subnet's externalGateway): the listed
// names that exist, in their order and once each; without a list, the nodes the selector
// matches (every node when it is nil), sorted by name.
func ChooseNodes(listed []string, selector *metav1.LabelSelector, nodes []corev1.Node) ([]string, error) {
	sel := labels.Everything()
	if len(listed) == 0 && selector != nil {
		var err error
		if sel, err = metav1.LabelSelectorAsSelector(selector); err != nil {
			return nil, err
		}
	}
	exists := map[string]bool{}
	var names []string
	for _, n := range nodes {
		if sel.Matches(labels.Set(n.Labels)) {
			exists[n.Name] = true
			names = append(names, n.Name)
		}
	}
	if len(listed) == 0 {
		slices.Sort(names)
		return names, nil
	}
	var out []string
	for _, n := range listed {
		if exists[n] && !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	return out, nil
}
