package e2e

import (
	"maps"
	"net/netip"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/kovn/kovn/pkg/annotation"
)

// The expected truth table of a NetworkPolicy probe matrix comes from this small model of the
// NetworkPolicy API (selectors, ipBlock/except, numbered, named and ranged ports, policy
// types), evaluated over the same objects the test gives the cluster: the test never writes
// a table by hand that could drift from its policies.

type probePod struct {
	// cluster is the pod's cluster id in a clusterset ("" in one cluster); on runs its probes
	// (nil: the cluster waitMatrix is called on); published: its namespace is published to
	// the other clusters' policies.
	cluster   string
	on        *cluster
	published bool
	ns, name  string
	labels    map[string]string
	nsLabels  map[string]string
	ip        netip.Addr // the family under test
	ips       []corev1.PodIP
	ports     map[string]int32
}

// allowedIn says whether src may open a TCP connection to dst:port under each cluster's
// policies (by cluster id; "" in one cluster), which apply to that cluster's own pods. A pod's
// connection to its own address never leaves it, so no policy applies to it; a peer is in the policy's cluster unless its namespace selector names the
// cluster label, which sees every cluster's published namespaces with that label set.
func allowedIn(byCluster map[string][]networkingv1.NetworkPolicy, src, dst probePod, port int32) bool {
	if src.cluster == dst.cluster && src.ns == dst.ns && src.name == dst.name {
		return true
	}
	return direction(byCluster[dst.cluster], dst, src, port, false) && direction(byCluster[src.cluster], src, dst, port, true)
}

// direction: is the traffic allowed at subject's end (ingress into it, or egress out of it)?
// policies are the subject's cluster's.
func direction(policies []networkingv1.NetworkPolicy, subject, peer probePod, port int32, egress bool) bool {
	isolated := false
	for i := range policies {
		np := &policies[i]
		in, out := modelTypes(np)
		if np.Namespace != subject.ns || !matches(&np.Spec.PodSelector, subject.labels) || (egress && !out) || (!egress && !in) {
			continue
		}
		isolated = true
		if egress {
			for _, r := range np.Spec.Egress {
				if ruleAllows(np.Namespace, subject.cluster, r.To, r.Ports, peer, peer, port) {
					return true
				}
			}
		} else {
			for _, r := range np.Spec.Ingress {
				if ruleAllows(np.Namespace, subject.cluster, r.From, r.Ports, peer, subject, port) {
					return true
				}
			}
		}
	}
	return !isolated
}

func modelTypes(np *networkingv1.NetworkPolicy) (in, out bool) {
	if len(np.Spec.PolicyTypes) == 0 {
		return true, len(np.Spec.Egress) > 0
	}
	for _, t := range np.Spec.PolicyTypes {
		in, out = in || t == networkingv1.PolicyTypeIngress, out || t == networkingv1.PolicyTypeEgress
	}
	return in, out
}

// ruleAllows: peer matches one of peers (or peers is empty) and the port matches, named
// ports resolving on dst. ns and cluster are the policy's.
func ruleAllows(ns, cluster string, peers []networkingv1.NetworkPolicyPeer, ports []networkingv1.NetworkPolicyPort, peer, dst probePod, port int32) bool {
	okPort := len(ports) == 0
	for _, p := range ports {
		switch {
		case p.Port == nil:
			okPort = true
		case p.Port.StrVal != "":
			okPort = okPort || dst.ports[p.Port.StrVal] == port
		case p.EndPort != nil:
			okPort = okPort || (port >= p.Port.IntVal && port <= *p.EndPort)
		default:
			okPort = okPort || p.Port.IntVal == port
		}
	}
	if !okPort {
		return false
	}
	if len(peers) == 0 {
		return true
	}
	for _, p := range peers {
		if p.IPBlock != nil {
			if blockHas(p.IPBlock, peer.ip) {
				return true
			}
			continue
		}
		nsOK := peer.ns == ns && peer.cluster == cluster
		switch {
		case clustersetWide(p.NamespaceSelector):
			// Another cluster's pods only if their namespace is published. (They carry no
			// named ports: the model does not cover a named port on a remote peer.)
			visible := peer.cluster == cluster || peer.published
			l := maps.Clone(peer.nsLabels)
			l[annotation.ClusterLabel] = peer.cluster
			nsOK = visible && peer.cluster != "" && matches(p.NamespaceSelector, l)
		case p.NamespaceSelector != nil:
			nsOK = peer.cluster == cluster && matches(p.NamespaceSelector, peer.nsLabels)
		}
		if nsOK && (p.PodSelector == nil || matches(p.PodSelector, peer.labels)) {
			return true
		}
	}
	return false
}

func clustersetWide(sel *metav1.LabelSelector) bool {
	if sel == nil {
		return false
	}
	if _, ok := sel.MatchLabels[annotation.ClusterLabel]; ok {
		return true
	}
	for _, e := range sel.MatchExpressions {
		if e.Key == annotation.ClusterLabel {
			return true
		}
	}
	return false
}

func blockHas(b *networkingv1.IPBlock, ip netip.Addr) bool {
	c, err := netip.ParsePrefix(b.CIDR)
	if err != nil || !c.Contains(ip) {
		return false
	}
	for _, e := range b.Except {
		if x, err := netip.ParsePrefix(e); err == nil && x.Contains(ip) {
			return false
		}
	}
	return true
}

func matches(sel *metav1.LabelSelector, l map[string]string) bool {
	s, err := metav1.LabelSelectorAsSelector(sel)
	return err == nil && s.Matches(labels.Set(l))
}
