package cluster

import (
	"fmt"

	kovnv1 "github.com/kovn/kovn/api/v1alpha1"
	"github.com/kovn/kovn/pkg/cluster/topology"
)

// podBandwidth resolves a pod's limits from its annotations (the pod owner's word) and its
// Subnet's default (the admin's): no annotation takes the default, an annotation lowers it
// but never raises it, and a malformed or out-of-range annotation keeps what is programmed
// now (current, asked only then: it reads NB), so a typo never lifts a limit. Each refused
// annotation yields a message.
func podBandwidth(annotations map[string]string, subnet topology.Bandwidth, current func() topology.Bandwidth) (topology.Bandwidth, []string) {
	var out topology.Bandwidth
	var problems []string
	for _, d := range []struct {
		key string
		def int
		cur func() int
		set *int
	}{
		{kovnv1.AnnotationIngressBandwidth, subnet.IngressKbps, func() int { return current().IngressKbps }, &out.IngressKbps},
		{kovnv1.AnnotationEgressBandwidth, subnet.EgressKbps, func() int { return current().EgressKbps }, &out.EgressKbps},
	} {
		v, ok := annotations[d.key]
		if !ok {
			*d.set = d.def
			continue
		}
		kbps, err := kovnv1.ParseBandwidth(v)
		switch {
		case err != nil:
			*d.set = d.cur()
			problems = append(problems, fmt.Sprintf("%s: %v; the limit stays %s", d.key, err, kbpsString(*d.set)))
		case d.def > 0 && kbps > d.def:
			*d.set = d.def
			problems = append(problems, fmt.Sprintf("%s: %s is above the Subnet's limit; the Subnet's %s applies", d.key, v, kbpsString(d.def)))
		default:
			*d.set = kbps
		}
	}
	return out, problems
}

// kbpsString writes a limit as the annotations do; 0 is none.
func kbpsString(kbps int) string {
	switch {
	case kbps == 0:
		return "none"
	case kbps%1000000 == 0:
		return fmt.Sprintf("%dG", kbps/1000000)
	case kbps%1000 == 0:
		return fmt.Sprintf("%dM", kbps/1000)
	}
	return fmt.Sprintf("%dk", kbps)
}

// subnetPodBandwidth turns a valid spec.podBandwidth into kbit/s (0: no default).
func subnetPodBandwidth(b *kovnv1.PodBandwidth) topology.Bandwidth {
	var out topology.Bandwidth
	if b == nil {
		return out
	}
	if b.Ingress != "" {
		out.IngressKbps, _ = kovnv1.ParseBandwidth(b.Ingress) // validated with the Subnet
	}
	if b.Egress != "" {
		out.EgressKbps, _ = kovnv1.ParseBandwidth(b.Egress)
	}
	return out
}
