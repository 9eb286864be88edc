// Package nodetest holds the fixtures the node side's tests share: Subnets with conditions
// and prefix lists.
package nodetest

import (
	"net/netip"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kovnv1 "github.com/kovn/kovn/api/v1alpha1"
)

// Subnet is a Subnet named name on cidr, natOutgoing if nat, with conds as its status.
func Subnet(name, cidr string, nat bool, conds ...metav1.Condition) *kovnv1.Subnet {
	return &kovnv1.Subnet{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: kovnv1.SubnetSpec{CIDRBlock: cidr, NATOutgoing: nat}, Status: kovnv1.SubnetStatus{Conditions: conds}}
}

// Cond is a condition of type typ, True if ok, with reason, changed now.
func Cond(typ string, ok bool, reason string) metav1.Condition {
	s := metav1.ConditionFalse
	if ok {
		s = metav1.ConditionTrue
	}
	return metav1.Condition{Type: typ, Status: s, Reason: reason, LastTransitionTime: metav1.Now()}
}

// Prefixes parses ss, panicking on a malformed one.
func Prefixes(ss ...string) []netip.Prefix {
	var out []netip.Prefix
	for _, s := range ss {
		out = append(out, netip.MustParsePrefix(s))
	}
	return out
}
