package mcs

import (
	"crypto/sha256"
	"encoding/hex"
	"slices"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	mcsv1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/kovn/kovn/pkg/cluster"
)

// Labels and names kovn puts on the objects it derives from an import.
const (
	// ManagedBy is the endpointslice.kubernetes.io/managed-by value of kovn's MCS slices: the
	// endpointslice controller leaves them alone, and kovn's Service path balances over them.
	ManagedBy = cluster.ImportedSliceManager
	// LabelDerivedFor names, on a derived Service, the imported Service it serves.
	LabelDerivedFor = "mcs.kovn.io/derived-for"
	// AnnotationDerivedService on a ServiceImport names its derived Service (as the mcs-api
	// reference controllers do).
	AnnotationDerivedService = "multicluster.kubernetes.io/derived-service"
)

// DerivedName is the name of the Service that holds an import's ClusterSetIPs in its
// namespace: "derived-" and a hash of the imported name (a user cannot pick an import whose
// derived Service lands on a name of their choosing without a hash collision).
func DerivedName(name string) string {
	h := sha256.Sum256([]byte(name))
	return "derived-" + hex.EncodeToString(h[:])[:10]
}

// DerivedService is the Service whose ClusterIPs are the import's ClusterSetIPs: no selector
// (its endpoints are kovn's MCS slices), the import's ports, affinity and families. A
// Headless import gets a headless one.
func DerivedService(im Import) *corev1.Service {
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: im.Namespace, Name: DerivedName(im.Name),
		Labels: map[string]string{LabelDerivedFor: im.Name}}}
	spec := &svc.Spec
	spec.Type = corev1.ServiceTypeClusterIP
	if im.Type == string(mcsv1.Headless) {
		spec.ClusterIP = corev1.ClusterIPNone
	}
	for _, p := range im.Ports {
		spec.Ports = append(spec.Ports, corev1.ServicePort{Name: p.Name, Protocol: corev1.Protocol(p.Protocol), Port: int32(p.Port),
			AppProtocol: p.AppProtocol, TargetPort: intstr.FromInt32(int32(p.Port))})
	}
	spec.SessionAffinity = corev1.ServiceAffinity(im.SessionAffinity)
	spec.SessionAffinityConfig, spec.InternalTrafficPolicy, spec.IPFamilies = im.serviceFields()
	spec.TrafficDistribution = im.TrafficDistribution
	policy := corev1.IPFamilyPolicySingleStack
	if len(spec.IPFamilies) > 1 {
		policy = corev1.IPFamilyPolicyRequireDualStack
	}
	spec.IPFamilyPolicy = &policy
	return svc
}

// serviceFields are the import's affinity timeout, internal traffic policy and IP families
// as the Service and ServiceImport APIs spell them.
func (im Import) serviceFields() (*corev1.SessionAffinityConfig, *corev1.ServiceInternalTrafficPolicy, []corev1.IPFamily) {
	var affinity *corev1.SessionAffinityConfig
	if im.AffinityTimeout != nil {
		t := int32(*im.AffinityTimeout)
		affinity = &corev1.SessionAffinityConfig{ClientIP: &corev1.ClientIPConfig{TimeoutSeconds: &t}}
	}
	var itp *corev1.ServiceInternalTrafficPolicy
	if im.InternalTrafficPolicy != nil {
		p := corev1.ServiceInternalTrafficPolicy(*im.InternalTrafficPolicy)
		itp = &p
	}
	var families []corev1.IPFamily
	for _, f := range im.IPFamilies {
		families = append(families, corev1.IPFamily(f))
	}
	return affinity, itp, families
}

// ImportSpec is the ServiceImport's spec for im, with the derived Service's ClusterIPs.
func ImportSpec(im Import, derived *corev1.Service) mcsv1.ServiceImportSpec {
	spec := mcsv1.ServiceImportSpec{Type: mcsv1.ServiceImportType(im.Type), SessionAffinity: corev1.ServiceAffinity(im.SessionAffinity),
		TrafficDistribution: im.TrafficDistribution, Ports: []mcsv1.ServicePort{}}
	for _, p := range im.Ports {
		spec.Ports = append(spec.Ports, mcsv1.ServicePort{Name: p.Name, Protocol: corev1.Protocol(p.Protocol), Port: int32(p.Port),
			AppProtocol: p.AppProtocol})
	}
	spec.SessionAffinityConfig, spec.InternalTrafficPolicy, spec.IPFamilies = im.serviceFields()
	if im.Type != string(mcsv1.Headless) && derived != nil {
		for _, ip := range derived.Spec.ClusterIPs {
			if ip != "" && ip != corev1.ClusterIPNone {
				spec.IPs = append(spec.IPs, ip)
			}
		}
	}
	return spec
}

// ImportedSlices are the EndpointSlices of the derived Service: one per exported slice, each
// from one source cluster, labelled as mcs-api and CoreDNS's multicluster option expect.
// Only the ports the import carries and the slice's cluster exposes are kept (im.Serves): a
// port a cluster lost in a conflict, or exposes with another number, is not routed to it; and
// the import's locality may leave a port to local alone (local-first, while local has a ready
// endpoint for it) or to the others (remote-only): a slice keeps its endpoints, without the
// ports that are not its cluster's here, so a change of readiness rewrites ports, not slices.
// Endpoints of local, this cluster's own, keep their node, so that
// internalTrafficPolicy=Local picks the client node's endpoints; another cluster's node names
// mean nothing here (and may be a local node's name too), so its endpoints carry none.
func ImportedSlices(im Import, store []Slice, local string) []*discoveryv1.EndpointSlice {
	derived := DerivedName(im.Name)
	taken := localServes(im, store, local)
	var out []*discoveryv1.EndpointSlice
	for _, s := range store {
		if !slices.Contains(im.Clusters, s.Cluster) {
			continue // a cluster whose export is gone: its slices go with it
		}
		h := sha256.Sum256([]byte(s.Cluster + "/" + s.Name))
		es := &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: im.Namespace,
			Name: derived + "-" + hex.EncodeToString(h[:])[:12],
			Labels: map[string]string{
				discoveryv1.LabelServiceName: derived, discoveryv1.LabelManagedBy: ManagedBy,
				mcsv1.LabelServiceName: im.Name, mcsv1.LabelSourceCluster: s.Cluster,
			}},
			AddressType: discoveryv1.AddressType(s.AddressType), Ports: []discoveryv1.EndpointPort{}, Endpoints: []discoveryv1.Endpoint{}}
		for _, p := range s.Ports {
			if !servesHere(im, s, p, local, taken) {
				continue
			}
			name, proto, port := p.Name, corev1.Protocol(p.Protocol), int32(p.Port)
			es.Ports = append(es.Ports, discoveryv1.EndpointPort{Name: &name, Protocol: &proto, Port: &port, AppProtocol: p.AppProtocol})
		}
		for _, e := range s.Endpoints {
			ready, serving, terminating := e.Ready, e.Serving, e.Terminating
			ep := discoveryv1.Endpoint{Addresses: slices.Clone(e.Addresses), Hostname: e.Hostname,
				Zone: e.Zone, Conditions: discoveryv1.EndpointConditions{Ready: &ready, Serving: &serving, Terminating: &terminating}}
			if s.Cluster == local {
				ep.NodeName = e.NodeName
			}
			es.Endpoints = append(es.Endpoints, ep)
		}
		out = append(out, es)
	}
	return out
}
