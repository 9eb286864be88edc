// Package endpoints is how kovn reads a Service's EndpointSlices on both sides, the
// controller's load balancers (pkg/cluster/topology) and each node's NodePort and external
// traffic rules (pkg/node/servicenat): one rule for which endpoints take new connections, so the
// cluster-wide path and a node's local path never disagree (KEP-1669, as kube-proxy).
package endpoints

import (
	"net/netip"

	discoveryv1 "k8s.io/api/discovery/v1"
)

// Endpoint is one address of an EndpointSlice endpoint with its conditions and its own slice's
// port numbers.
type Endpoint struct {
	Addr                        netip.Addr
	Ready, Serving, Terminating bool
	Node                        string
	Ports                       map[string]int32 // service port name -> endpoint port
}

// FromSlices flattens EndpointSlices into endpoints. Unknown ready and serving conditions count
// as true, as the EndpointSlice API says; FQDN slices carry no address and are left out.
func FromSlices(slices []discoveryv1.EndpointSlice) []Endpoint {
	var out []Endpoint
	for _, sl := range slices {
		if sl.AddressType == discoveryv1.AddressTypeFQDN {
			continue
		}
		ports := map[string]int32{}
		for _, p := range sl.Ports {
			if p.Port == nil {
				continue
			}
			name := ""
			if p.Name != nil {
				name = *p.Name
			}
			ports[name] = *p.Port
		}
		for _, e := range sl.Endpoints {
			c := e.Conditions
			ep := Endpoint{Ready: c.Ready == nil || *c.Ready, Serving: c.Serving == nil || *c.Serving,
				Terminating: c.Terminating != nil && *c.Terminating, Ports: ports}
			if e.NodeName != nil {
				ep.Node = *e.NodeName
			}
			for _, a := range e.Addresses {
				if addr, err := netip.ParseAddr(a); err == nil {
					ep.Addr = addr
					out = append(out, ep)
				}
			}
		}
	}
	return out
}

// Usable are the endpoints among those keep accepts that may take new connections, and whether
// they are ready ones: the ready endpoints; when none is ready, the serving ones that are
// terminating, so a Service whose last pods are shutting down (a rolling update's tail) keeps
// answering until they stop. Not-serving endpoints never.
func Usable(eps []Endpoint, keep func(Endpoint) bool) (usable []Endpoint, ready bool) {
	var readyEps, terminating []Endpoint
	for _, e := range eps {
		if !e.Addr.IsValid() || !keep(e) {
			continue
		}
		switch {
		case e.Ready:
			readyEps = append(readyEps, e)
		case e.Serving && e.Terminating:
			terminating = append(terminating, e)
		}
	}
	if len(readyEps) > 0 {
		return readyEps, true
	}
	return terminating, false
}
