package guard

import (
	"fmt"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// A dpctl/dump-conntrack listing as OVS 3.1's userspace conntrack prints it: the client's
// flow to a UDP ClusterIP pinned to be1 (gone) in zone 7 and to be2 in zone 9, the entry the
// backend's own zone holds (not translated), another Service's TCP entry, an IPv6 entry to
// the deleted backend in zone 0 (no zone= printed).
const ctDump = `udp,orig=(src=10.16.0.5,dst=10.96.0.53,sport=40053,dport=53),reply=(src=10.16.0.7,dst=10.16.0.5,sport=5353,dport=40053),zone=7
udp,orig=(src=10.16.0.6,dst=10.96.0.53,sport=40054,dport=53),reply=(src=10.16.0.8,dst=10.16.0.6,sport=5353,dport=40054),zone=9,mark=2
udp,orig=(src=10.16.0.5,dst=10.16.0.8,sport=40053,dport=5353),reply=(src=10.16.0.8,dst=10.16.0.5,sport=5353,dport=40053),zone=12
tcp,orig=(src=10.16.0.5,dst=10.96.0.80,sport=33000,dport=80),reply=(src=10.16.0.7,dst=10.16.0.5,sport=8080,dport=33000),zone=7,protoinfo=(state=ESTABLISHED)
udp,orig=(src=fd00:10:16::5,dst=fd00:10:96::35,sport=40053,dport=53),reply=(src=fd00:10:16::7,dst=fd00:10:16::5,sport=5353,dport=40053)
`

func TestStaleUDPEntries(t *testing.T) {
	entries := ParseConntrack(ctDump)
	if len(entries) != 4 {
		t.Fatalf("parsed %d UDP entries, want 4: %+v", len(entries), entries)
	}
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "svc", Name: "dns"}, Spec: corev1.ServiceSpec{
		ClusterIPs: []string{"10.96.0.53", "fd00:10:96::35"},
		Ports:      []corev1.ServicePort{{Name: "dns", Protocol: corev1.ProtocolUDP, Port: 53}, {Name: "web", Protocol: corev1.ProtocolTCP, Port: 80}}}}
	slice := discoveryv1.EndpointSlice{
		Ports: []discoveryv1.EndpointPort{{Name: ptr.To("dns"), Protocol: ptr.To(corev1.ProtocolUDP), Port: ptr.To[int32](5353)},
			{Name: ptr.To("web"), Protocol: ptr.To(corev1.ProtocolTCP), Port: ptr.To[int32](8080)}},
		Endpoints: []discoveryv1.Endpoint{{Addresses: []string{"10.16.0.8"}}, {Addresses: []string{"fd00:10:16::8"}}}}
	live := UDPBackends(svc, []discoveryv1.EndpointSlice{slice})
	if len(live) != 2 {
		t.Fatalf("UDP VIPs: %v, want the two ClusterIPs on 53 only", live)
	}
	stale := StaleUDPEntries(entries, live)
	var got []string
	for _, e := range stale {
		got = append(got, fmt.Sprintf("%s zone %d", e.origTuple(), e.Zone))
	}
	want := []string{
		"ct_nw_src=10.16.0.5,ct_nw_dst=10.96.0.53,ct_nw_proto=17,ct_tp_src=40053,ct_tp_dst=53 zone 7",
		"ct_ipv6_src=fd00:10:16::5,ct_ipv6_dst=fd00:10:96::35,ct_nw_proto=17,ct_tp_src=40053,ct_tp_dst=53 zone 0",
	}
	if !slices.Equal(got, want) {
		t.Fatalf("stale entries:\n%v\nwant\n%v", got, want)
	}
	// be1 back (same address and port): nothing is stale; a port change makes it stale again.
	slice.Endpoints = append(slice.Endpoints, discoveryv1.Endpoint{Addresses: []string{"10.16.0.7", "fd00:10:16::7"}})
	if s := StaleUDPEntries(entries, UDPBackends(svc, []discoveryv1.EndpointSlice{slice})); len(s) != 0 {
		t.Fatalf("stale with every backend present: %+v", s)
	}
	slice.Ports[0].Port = ptr.To[int32](5354)
	if s := StaleUDPEntries(entries, UDPBackends(svc, []discoveryv1.EndpointSlice{slice})); len(s) != 3 {
		t.Fatalf("target port changed: %d stale, want 3", len(s))
	}
	if fingerprint(live) == fingerprint(UDPBackends(svc, []discoveryv1.EndpointSlice{slice})) {
		t.Fatal("fingerprint did not change with the backends")
	}
}
