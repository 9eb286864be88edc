package mcs

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	mcsv1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
)

// ExportOf is what cluster exports of svc under se, or the reason it cannot be exported
// (a Valid=False reason of mcs-api: InvalidServiceType for ExternalName).
func ExportOf(cluster string, svc *corev1.Service, se *mcsv1.ServiceExport) (Export, mcsv1.ServiceExportConditionReason, string) {
	if svc.Spec.Type == corev1.ServiceTypeExternalName {
		return Export{}, mcsv1.ServiceExportReasonInvalidServiceType, "an ExternalName Service cannot be exported"
	}
	e := Export{Cluster: cluster, Namespace: svc.Namespace, Name: svc.Name, Type: string(mcsv1.ClusterSetIP),
		SessionAffinity: string(svc.Spec.SessionAffinity), TrafficDistribution: svc.Spec.TrafficDistribution,
		Labels: se.Spec.ExportedLabels, Annotations: se.Spec.ExportedAnnotations, ExportedAt: se.CreationTimestamp.Time}
	if svc.Spec.ClusterIP == corev1.ClusterIPNone {
		e.Type = string(mcsv1.Headless)
	}
	if e.SessionAffinity == "" {
		e.SessionAffinity = string(corev1.ServiceAffinityNone)
	}
	if c := svc.Spec.SessionAffinityConfig; svc.Spec.SessionAffinity == corev1.ServiceAffinityClientIP && c != nil &&
		c.ClientIP != nil && c.ClientIP.TimeoutSeconds != nil {
		t := int(*c.ClientIP.TimeoutSeconds)
		e.AffinityTimeout = &t
	}
	if p := svc.Spec.InternalTrafficPolicy; p != nil {
		s := string(*p)
		e.InternalTrafficPolicy = &s
	}
	for _, f := range svc.Spec.IPFamilies {
		e.IPFamilies = append(e.IPFamilies, string(f))
	}
	for _, p := range svc.Spec.Ports {
		proto := string(p.Protocol)
		if proto == "" {
			proto = string(corev1.ProtocolTCP)
		}
		e.Ports = append(e.Ports, Port{Name: p.Name, Protocol: proto, Port: int(p.Port), AppProtocol: p.AppProtocol})
	}
	return e, "", ""
}

// endpointSliceController manages the EndpointSlices of a Service with a selector.
const endpointSliceController = "endpointslice-controller.k8s.io"

// SlicesOf are the store's copies of svc's EndpointSlices in this cluster. Slices that kovn
// itself made for an import are never exported again. For a Service with a selector only the
// endpointslice controller's slices count: another slice carrying the service-name label is
// something anyone allowed to write EndpointSlices in the namespace could add, and exporting
// it would send every cluster's traffic to addresses nobody vetted. A selector-less Service's
// slices are its owner's by design and are exported as they are.
func SlicesOf(svc *corev1.Service, eps []discoveryv1.EndpointSlice) []Slice {
	var out []Slice
	for _, s := range eps {
		if _, imported := s.Labels[mcsv1.LabelServiceName]; imported || s.AddressType == discoveryv1.AddressTypeFQDN {
			continue
		}
		if len(svc.Spec.Selector) > 0 && s.Labels[discoveryv1.LabelManagedBy] != endpointSliceController {
			continue
		}
		sl := Slice{Name: s.Name, AddressType: string(s.AddressType)}
		for _, p := range s.Ports {
			if p.Port == nil {
				continue
			}
			port := Port{Protocol: string(corev1.ProtocolTCP), Port: int(*p.Port), AppProtocol: p.AppProtocol}
			if p.Name != nil {
				port.Name = *p.Name
			}
			if p.Protocol != nil {
				port.Protocol = string(*p.Protocol)
			}
			sl.Ports = append(sl.Ports, port)
		}
		for _, ep := range s.Endpoints {
			c := ep.Conditions
			sl.Endpoints = append(sl.Endpoints, Endpoint{Addresses: slices.Clone(ep.Addresses), Ready: c.Ready == nil || *c.Ready,
				Serving: c.Serving == nil || *c.Serving, Terminating: c.Terminating != nil && *c.Terminating,
				Hostname: ep.Hostname, Zone: ep.Zone, NodeName: ep.NodeName})
		}
		out = append(out, sl)
	}
	return out
}

// Import is the clusterset's view of one exported Service: what every cluster imports.
type Import struct {
	Namespace, Name       string
	Type                  string
	Ports                 []Port
	SessionAffinity       string
	AffinityTimeout       *int
	InternalTrafficPolicy *string
	TrafficDistribution   *string
	IPFamilies            []string
	Labels, Annotations   map[string]string
	Locality              string   // the oldest export's (Export.Locality)
	Clusters              []string // the exporting clusters, sorted
	// Serves holds, for each exporting cluster, the keys (portKey) of the import's ports its
	// own export exposes with the same name, protocol and number. KEP-1645: traffic for a
	// port goes only to clusters whose Service exposes that port.
	Serves map[string]map[string]bool
	// Conflicts are the mcs-api Conflict reasons (PortConflict, TypeConflict, ...) and a
	// message naming the clusters that disagree; empty when every export agrees.
	Conflicts []mcsv1.ServiceExportConditionReason
	Message   string
}

// Merge is the import of exports (every cluster's exports of one Service, oldest first) as
// KEP-1645 says: ports are unioned (merged by name, else by protocol and number; the oldest
// export wins a name), every other property is the oldest export's, and each disagreement is
// a conflict reported on every export.
func Merge(exports []Export) Import {
	if len(exports) == 0 {
		return Import{}
	}
	oldest := exports[0]
	im := Import{Namespace: oldest.Namespace, Name: oldest.Name, Type: oldest.Type, SessionAffinity: oldest.SessionAffinity,
		AffinityTimeout: oldest.AffinityTimeout, InternalTrafficPolicy: oldest.InternalTrafficPolicy,
		TrafficDistribution: oldest.TrafficDistribution, IPFamilies: oldest.IPFamilies,
		Labels: oldest.Labels, Annotations: oldest.Annotations, Locality: oldest.Locality}
	var msgs []string
	conflict := func(reason mcsv1.ServiceExportConditionReason, what string, e Export) {
		if !slices.Contains(im.Conflicts, reason) {
			im.Conflicts = append(im.Conflicts, reason)
		}
		msgs = append(msgs, fmt.Sprintf("%s of cluster %s differs from cluster %s's (the oldest export, which wins)", what, e.Cluster, oldest.Cluster))
	}
	im.Ports = mergePorts(exports)
	im.Serves = servedPorts(im.Ports, exports)
	for _, e := range exports {
		im.Clusters = append(im.Clusters, e.Cluster)
		if e.Cluster == oldest.Cluster {
			continue
		}
		if !slices.Equal(normalizeExport(e).Ports, normalizeExport(oldest).Ports) {
			conflict(mcsv1.ServiceExportReasonPortConflict, "ports", e)
		}
		if e.Type != oldest.Type {
			conflict(mcsv1.ServiceExportReasonTypeConflict, "type "+e.Type, e)
		}
		if e.SessionAffinity != oldest.SessionAffinity {
			conflict(mcsv1.ServiceExportReasonSessionAffinityConflict, "sessionAffinity", e)
		} else if !equalPtr(e.AffinityTimeout, oldest.AffinityTimeout) {
			conflict(mcsv1.ServiceExportReasonSessionAffinityConfigConflict, "sessionAffinityConfig", e)
		}
		if !equalPtr(e.InternalTrafficPolicy, oldest.InternalTrafficPolicy) {
			conflict(mcsv1.ServiceExportReasonInternalTrafficPolicyConflict, "internalTrafficPolicy", e)
		}
		if !equalPtr(e.TrafficDistribution, oldest.TrafficDistribution) {
			conflict(mcsv1.ServiceExportReasonTrafficDistributionConflict, "trafficDistribution", e)
		}
		if !slices.Equal(e.IPFamilies, oldest.IPFamilies) {
			conflict(mcsv1.ServiceExportReasonIPFamilyConflict, "ipFamilies", e)
		}
		if !maps.Equal(e.Labels, oldest.Labels) {
			conflict(mcsv1.ServiceExportReasonLabelsConflict, "exportedLabels", e)
		}
		if !maps.Equal(e.Annotations, oldest.Annotations) {
			conflict(mcsv1.ServiceExportReasonAnnotationsConflict, "exportedAnnotations", e)
		}
		if e.Locality != oldest.Locality {
			conflict(ReasonLocalityConflict, AnnotationLocality, e)
		}
	}
	slices.Sort(im.Clusters)
	im.Clusters = slices.Compact(im.Clusters)
	im.Message = strings.Join(msgs, "; ")
	return im
}

// mergePorts unions the exports' ports, oldest export first: a named port is taken from the
// first export that has the name; an unnamed one by protocol and number. The union must still
// be a valid Service's ports (several ports all named, no protocol and number twice), so a
// later export adds only named ports with a new protocol and number, and nothing to an oldest
// export whose one port is unnamed; what it cannot add is part of its PortConflict.
func mergePorts(exports []Export) []Port {
	out := slices.Clone(exports[0].Ports)
	names, numbers := map[string]bool{}, map[string]bool{}
	unnamed := false
	for _, p := range out {
		names[p.Name], numbers[fmt.Sprintf("%s/%d", p.Protocol, p.Port)] = true, true
		unnamed = unnamed || p.Name == ""
	}
	for _, e := range exports[1:] {
		for _, p := range e.Ports {
			number := fmt.Sprintf("%s/%d", p.Protocol, p.Port)
			if unnamed || p.Name == "" || names[p.Name] || numbers[number] {
				continue
			}
			names[p.Name], numbers[number] = true, true
			out = append(out, p)
		}
	}
	sortPorts(out)
	return out
}

// servedPorts maps each export's cluster to the import ports it exposes as the import has
// them (name, protocol and number): a cluster that lost a port's name to an older export with
// another number serves none of that port's traffic.
func servedPorts(ports []Port, exports []Export) map[string]map[string]bool {
	out := map[string]map[string]bool{}
	for _, e := range exports {
		served := map[string]bool{}
		for _, p := range ports {
			if slices.ContainsFunc(e.Ports, func(q Port) bool { return q.Name == p.Name && q.Protocol == p.Protocol && q.Port == p.Port }) {
				served[portKey(p)] = true
			}
		}
		out[e.Cluster] = served
	}
	return out
}

// portKey is how an endpoint port is matched to an import port: by name and protocol (an
// endpoint port carries the target port's number, not the Service's).
func portKey(p Port) string { return p.Name + "/" + p.Protocol }

func equalPtr[T comparable](a, b *T) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return *a == *b
}
