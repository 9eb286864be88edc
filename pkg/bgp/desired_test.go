package bgp

import (
	"net/netip"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	kovnv1 "github.com/kovn/kovn/api/v1alpha1"
)

func subnet(name, cidr string, advertise bool, policy kovnv1.BGPPolicy) kovnv1.Subnet {
	return kovnv1.Subnet{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: kovnv1.SubnetSpec{CIDRBlock: cidr, BGPAdvertise: advertise, BGPPolicy: policy}}
}

func podIP(ns, pod, subnet, node, v4, v6 string) kovnv1.IP {
	return kovnv1.IP{ObjectMeta: metav1.ObjectMeta{Name: pod + "." + ns},
		Spec: kovnv1.IPSpec{Namespace: ns, PodName: pod, Subnet: subnet, NodeName: node, V4IP: v4, V6IP: v6}}
}

func service(name, bgp string, etp corev1.ServiceExternalTrafficPolicy, clusterIPs ...string) corev1.Service {
	s := corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, Annotations: map[string]string{}},
		Spec: corev1.ServiceSpec{ClusterIPs: clusterIPs, ExternalTrafficPolicy: etp}}
	if bgp != "" {
		s.Annotations[AnnotationBGP] = bgp
	}
	return s
}

func endpoints(svc, node string, ready bool) discoveryv1.EndpointSlice {
	return discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: svc + "-x", Labels: map[string]string{discoveryv1.LabelServiceName: svc}},
		Endpoints:  []discoveryv1.Endpoint{{Addresses: []string{"10.16.0.9"}, NodeName: &node, Conditions: discoveryv1.EndpointConditions{Ready: &ready}}},
	}
}

func prefixes(rs []Route) []string {
	var out []string
	for _, r := range rs {
		out = append(out, r.Prefix.String())
	}
	return out
}

func TestDesiredRoutes(t *testing.T) {
	refused := subnet("refused", "10.50.0.0/24", true, "")
	refused.Status.Conditions = []metav1.Condition{{Type: kovnv1.ConditionValidated, Status: metav1.ConditionFalse}}
	custom := subnet("custom", "10.60.0.0/24", true, "")
	custom.Spec.Vpc = "tenant"
	lb := service("lb", "true", corev1.ServiceExternalTrafficPolicyCluster, "10.96.0.20")
	lb.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "192.0.2.10"}}
	lb.Spec.ExternalIPs = []string{"198.51.100.7", "203.0.113.9"} // only the first is inside the allowed range
	in := Input{
		Subnets: []kovnv1.Subnet{
			subnet("wide", "10.40.0.0/16,fd00:40::/64", true, ""),
			subnet("perpod", "10.41.0.0/24", true, kovnv1.BGPPolicyLocal),
			subnet("quiet", "10.42.0.0/24", false, ""),
			refused, custom,
		},
		IPs: []kovnv1.IP{
			podIP("default", "a", "perpod", "n1", "10.41.0.5", ""),
			podIP("default", "b", "perpod", "n2", "10.41.0.6", ""),
			podIP("default", "c", "wide", "n1", "10.40.0.7", "fd00:40::7"), // annotated: host routes too
			podIP("default", "d", "quiet", "n1", "10.42.0.8", ""),          // annotated, subnet not advertised
			podIP("default", "e", "wide", "n1", "10.99.0.1", ""),           // outside its subnet: never announced
		},
		AnnotatedPods: map[types.NamespacedName]bool{{Namespace: "default", Name: "c"}: true, {Namespace: "default", Name: "d"}: true,
			{Namespace: "default", Name: "e"}: true},
		Services: []corev1.Service{
			service("plain", "", "", "10.96.0.10"),
			lb,
			service("etplocal", "true", corev1.ServiceExternalTrafficPolicyLocal, "10.96.0.30", "fd00:96::30"),
			service("forcedlocal", "local", "", "10.96.0.40"),
			service("headless", "true", "", "None"),
		},
		EndpointSlices:  []discoveryv1.EndpointSlice{endpoints("etplocal", "n1", true), endpoints("forcedlocal", "n1", false)},
		ExternalIPCIDRs: []netip.Prefix{netip.MustParsePrefix("198.51.100.0/24")},
	}
	for node, want := range map[string][]string{
		"n1": {"10.40.0.0/16", "10.40.0.7/32", "10.41.0.5/32", "10.96.0.20/32", "10.96.0.30/32", "192.0.2.10/32", "198.51.100.7/32", "fd00:40::/64", "fd00:40::7/128", "fd00:96::30/128"},
		"n2": {"10.40.0.0/16", "10.41.0.6/32", "10.96.0.20/32", "192.0.2.10/32", "198.51.100.7/32", "fd00:40::/64"},
	} {
		in.Node = node
		if got := prefixes(Desired(in)); !slices.Equal(got, want) {
			t.Errorf("node %s announces %v, want %v", node, got, want)
		}
	}
	in.Node = "n1"
	for _, r := range Desired(in) {
		if r.Prefix.String() == "10.41.0.5/32" && r.Why != "pod default/a" {
			t.Errorf("10.41.0.5/32 announced because %q, want pod default/a", r.Why)
		}
	}
}

// The function is pure: the same input in another order gives the same routes.
func TestDesiredIsOrderIndependent(t *testing.T) {
	a := Input{Node: "n1", Subnets: []kovnv1.Subnet{subnet("x", "10.1.0.0/24", true, ""), subnet("y", "fd00:1::/64,10.2.0.0/24", true, "")}}
	b := Input{Node: "n1", Subnets: []kovnv1.Subnet{a.Subnets[1], a.Subnets[0]}}
	if ga, gb := prefixes(Desired(a)), prefixes(Desired(b)); !slices.Equal(ga, gb) || len(ga) != 3 {
		t.Errorf("%v vs %v", ga, gb)
	}
}
