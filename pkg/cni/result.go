package cni

import (
	"net"

	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"

	"github.com/kovn/kovn/pkg/hostnet"
)

// buildResult is the CNI result of a successful ADD: the node-side veth, the pod interface
// (with its sandbox path) and its addresses, gateways and routes.
func buildResult(req *Request, pn *PodNetwork, spec *vethSpec, hostMAC, podMAC net.HardwareAddr) *current.Result {
	result := &current.Result{
		CNIVersion: ResultVersion,
		Interfaces: []*current.Interface{
			{Name: spec.hostIf, Mac: hostMAC.String()},
			{Name: spec.podIf, Mac: podMAC.String(), Sandbox: req.Netns},
		},
	}
	podIfIndex := current.Int(1)
	for _, ip := range pn.IPs {
		cfg := &current.IPConfig{Interface: podIfIndex, Address: *hostnet.IPNet(ip)}
		if gw, ok := pn.gatewayFor(ip); ok {
			cfg.Gateway = gw.AsSlice()
		}
		result.IPs = append(result.IPs, cfg)
	}
	for _, r := range spec.routes {
		route := &types.Route{Dst: *hostnet.IPNet(r.Dst.Masked())}
		if r.Gateway.IsValid() {
			route.GW = r.Gateway.AsSlice()
		}
		result.Routes = append(result.Routes, route)
	}
	return result
}
