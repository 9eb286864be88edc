// Package kovnctl is kubectl-kovn's logic: what it reads from a cluster and what it makes of
// it, apart from the command line and the printing.
package kovnctl

import (
	"fmt"
	"slices"
	"strings"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	mcsv1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	kovnv1 "github.com/kovn/kovn/api/v1alpha1"
)

// Inputs are the objects status reads, listed from one cluster.
type Inputs struct {
	Now          time.Time
	Lease        *coordinationv1.Lease // kube-system/kovn-controller; nil when absent
	Nodes        []corev1.Node
	Subnets      []kovnv1.Subnet
	InterConnect *kovnv1.InterConnect // nil: not interconnected
	ForeignAZs   []kovnv1.ForeignAZ
	Exports      []mcsv1.ServiceExport
	Imports      []mcsv1.ServiceImport
	BgpPeers     []kovnv1.BgpPeer
	// Pingers is what kovn-pinger found (ScrapePaths).
	Pingers PingerScrape
	// Central is what the OVN central pods' kovn-ovn-monitors read (ScrapeCentral).
	Central CentralScrape
}

// Problem is one thing wrong: the object, what is wrong, and what to do.
type Problem struct {
	Object string `json:"object"`
	Fault  string `json:"fault"`
	Fix    string `json:"fix,omitempty"`
}

// Report is the status of kovn in one cluster; Problems empty means healthy.
type Report struct {
	Controller   ControllerStatus    `json:"controller"`
	Nodes        []NodeStatus        `json:"nodes"`
	Subnets      []SubnetStatus      `json:"subnets"`
	Interconnect *InterconnectStatus `json:"interconnect,omitempty"`
	ForeignAZs   []ForeignAZStatus   `json:"foreignAZs,omitempty"`
	Exports      []ExportStatus      `json:"exports,omitempty"`
	Imports      []ImportStatus      `json:"imports,omitempty"`
	BGP          []BGPSessionStatus  `json:"bgp,omitempty"`
	// Pingers is how many kovn-pinger pods answered; LossyPaths what they found lossy;
	// SilentPingers the nodes whose ready pinger did not answer (pods/exec).
	Pingers       int          `json:"pingers"`
	LossyPaths    []PathStatus `json:"lossyPaths,omitempty"`
	SilentPingers []string     `json:"silentPingers,omitempty"`
	// Central is each OVN central node's view of each database it serves.
	Central  []CentralMember `json:"central,omitempty"`
	Problems []Problem       `json:"problems"`
}

type ControllerStatus struct {
	Leader     string `json:"leader"`
	RenewedAgo string `json:"renewedAgo"`
	OK         bool   `json:"ok"`
}

type NodeStatus struct {
	Name    string `json:"name"`
	Kubelet string `json:"kubelet"` // Ready condition status
	Network string `json:"network"` // KovnNetworkReady: True, False, Unknown (not reporting)
	Reason  string `json:"reason"`
}

type SubnetStatus struct {
	Name    string `json:"name"`
	CIDR    string `json:"cidr"`
	V4Used  int64  `json:"v4Used"`
	V4Free  int64  `json:"v4Free"`
	V6Used  int64  `json:"v6Used"`
	V6Free  int64  `json:"v6Free"`
	Ready   string `json:"ready"`
	Message string `json:"message,omitempty"`
}

type InterconnectStatus struct {
	AZ             string         `json:"az"`
	Ready          string         `json:"ready"`
	Reason         string         `json:"reason,omitempty"`
	Message        string         `json:"message,omitempty"`
	Gateways       []string       `json:"gateways"`
	ActiveGateways []string       `json:"activeGateways"`
	Advertised     []string       `json:"advertised"`
	Peers          []PeerAZStatus `json:"peers"`
	Conflicts      string         `json:"conflicts,omitempty"`
}

type PeerAZStatus struct {
	AZ       string   `json:"az"`
	Gateways []string `json:"gateways"`
	Routes   []string `json:"routes"`
}

type ExportStatus struct {
	Name  string `json:"name"` // namespace/name
	State string `json:"state"`
	Why   string `json:"why,omitempty"`
}

type ImportStatus struct {
	Name     string   `json:"name"`
	Type     string   `json:"type"`
	IPs      []string `json:"ips,omitempty"`
	Clusters []string `json:"clusters"`
}

type BGPSessionStatus struct {
	Peer     string `json:"peer"`
	Node     string `json:"node"`
	State    string `json:"state"`
	Sent     int32  `json:"sent"`
	Received int32  `json:"received"`
	Error    string `json:"error,omitempty"`
}

// staleAfter: a node condition older than this means kovn-daemon stopped reporting.
const staleAfter = 3 * kovnv1.NodeConditionHeartbeat

// Build makes the report: a pure function of the listed objects and the time.
func Build(in Inputs) Report {
	r := Report{Problems: []Problem{}}
	r.controller(in)
	r.nodes(in)
	r.subnets(in)
	r.interconnect(in)
	r.foreignAZs(in)
	r.mcs(in)
	r.bgp(in)
	r.paths(in)
	r.central(in)
	return r
}

// paths: each path kovn-pinger found lossy (a round lost every probe, or two in a row lost one) is a problem,
// named by its source node and target.
func (r *Report) paths(in Inputs) {
	r.Pingers, r.LossyPaths, r.SilentPingers = in.Pingers.Answered, in.Pingers.Lossy, in.Pingers.Silent
	for _, n := range in.Pingers.Silent {
		r.problem("pinger/"+n, fmt.Sprintf("the kovn-pinger on %s is ready but its metrics do not answer (pods/exec) within %s", n, ScrapeTimeout),
			"pods/exec reaches it through the kubelet of "+n+": check that node, and the kovn-pinger pod's logs there")
	}
	for _, p := range in.Pingers.Lossy {
		target := p.Kind + " " + p.Target
		switch p.Kind {
		case "pod":
			target = "the pinger pod on " + p.Target
		case "remote-pod":
			target = "a pinger pod of another cluster, " + p.Target
		}
		if p.Family != "" {
			target += " (" + p.Family + ")"
		}
		r.problem("path/"+p.Source+"->"+p.Kind+"/"+p.Target, fmt.Sprintf("from %s to %s loses probes (%g of %g lost since the pinger started)",
			p.Source, target, p.Lost, p.Sent),
			"kubectl kovn diagnose (tunnels, ovn-controller); kubectl kovn trace from a pod on "+p.Source+" to the target")
	}
}

func (r *Report) problem(object, fault, fix string) {
	r.Problems = append(r.Problems, Problem{Object: object, Fault: fault, Fix: fix})
}

func ago(now, then time.Time) string {
	if then.IsZero() {
		return "never"
	}
	return now.Sub(then).Round(time.Second).String()
}

func (r *Report) controller(in Inputs) {
	l := in.Lease
	if l == nil || l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity == "" {
		r.problem("kovn-controller", "no kovn-controller holds the leader lease kube-system/kovn-controller: nothing is programmed",
			"check the kovn-controller pods in kube-system (kubectl -n kube-system get pods -l app=kovn-controller) and their logs")
		return
	}
	var renewed time.Time
	if l.Spec.RenewTime != nil {
		renewed = l.Spec.RenewTime.Time
	}
	duration := 15 * time.Second
	if l.Spec.LeaseDurationSeconds != nil {
		duration = time.Duration(*l.Spec.LeaseDurationSeconds) * time.Second
	}
	r.Controller = ControllerStatus{Leader: *l.Spec.HolderIdentity, RenewedAgo: ago(in.Now, renewed), OK: in.Now.Sub(renewed) <= duration}
	if !r.Controller.OK {
		r.problem("kovn-controller", fmt.Sprintf("the leader %s last renewed its lease %s ago (lease %s): no replica is programming",
			r.Controller.Leader, r.Controller.RenewedAgo, duration),
			"check the kovn-controller pods in kube-system and their logs; a replica takes over once the lease expires")
	}
}

func nodeCondition(n *corev1.Node, t corev1.NodeConditionType) *corev1.NodeCondition {
	for i := range n.Status.Conditions {
		if n.Status.Conditions[i].Type == t {
			return &n.Status.Conditions[i]
		}
	}
	return nil
}

func (r *Report) nodes(in Inputs) {
	for i := range in.Nodes {
		n := &in.Nodes[i]
		s := NodeStatus{Name: n.Name, Kubelet: "Unknown", Network: "Unknown"}
		if c := nodeCondition(n, corev1.NodeReady); c != nil {
			s.Kubelet = string(c.Status)
		}
		c := nodeCondition(n, corev1.NodeConditionType(kovnv1.NodeConditionNetworkReady))
		switch {
		case c == nil:
			s.Reason = "kovn-daemon never reported"
			r.problem("node/"+n.Name, "kovn-daemon has never reported this node's network: pods here get no network",
				"check the kovn-daemon pod on "+n.Name+" (kubectl -n kube-system get pods -l app=kovn-daemon -o wide) and its logs")
		case in.Now.Sub(c.LastHeartbeatTime.Time) > staleAfter:
			s.Reason = "kovn-daemon stopped reporting " + ago(in.Now, c.LastHeartbeatTime.Time) + " ago"
			r.problem("node/"+n.Name, fmt.Sprintf("kovn-daemon stopped reporting %s ago (last: %s): it is not running or cannot reach the API",
				ago(in.Now, c.LastHeartbeatTime.Time), c.Reason), "check the kovn-daemon pod on "+n.Name+" and its logs")
		default:
			s.Network, s.Reason = string(c.Status), c.Reason
			if c.Status != corev1.ConditionTrue {
				r.problem("node/"+n.Name, c.Message+" (since "+ago(in.Now, c.LastTransitionTime.Time)+")", nodeFix(c.Reason, n.Name))
			}
		}
		r.Nodes = append(r.Nodes, s)
	}
}

func nodeFix(reason, name string) string {
	switch reason {
	case kovnv1.ReasonOVSDown:
		return "check the kovn-ovs pod on " + name + " (containers ovsdb and vswitchd) and its logs"
	case kovnv1.ReasonOVNControllerDown:
		return "check the kovn-ovs pod on " + name + " (container ovn-controller) and its logs; it must reach OVN SB"
	}
	return "check the kovn-daemon pod on " + name + " and its logs"
}

func (r *Report) subnets(in Inputs) {
	for i := range in.Subnets {
		sn := &in.Subnets[i]
		s := SubnetStatus{Name: sn.Name, CIDR: sn.Spec.CIDRBlock, V4Used: sn.Status.V4UsedIPs, V4Free: sn.Status.V4AvailableIPs,
			V6Used: sn.Status.V6UsedIPs, V6Free: sn.Status.V6AvailableIPs, Ready: "Unknown"}
		if c := meta.FindStatusCondition(sn.Status.Conditions, kovnv1.ConditionReady); c != nil {
			s.Ready = string(c.Status)
			if c.Status != metav1.ConditionTrue {
				s.Message = c.Message
				r.problem("subnet/"+sn.Name, c.Reason+": "+c.Message, "kubectl describe subnet "+sn.Name+" (events); fix its spec")
			}
		}
		r.Subnets = append(r.Subnets, s)
	}
}

func (r *Report) interconnect(in Inputs) {
	ic := in.InterConnect
	if ic == nil {
		return
	}
	s := &InterconnectStatus{AZ: ic.Status.AZName, Ready: "Unknown", ActiveGateways: ic.Status.ActiveGateways,
		Advertised: ic.Status.Advertised}
	if s.AZ == "" {
		s.AZ = ic.Spec.AZName
	}
	for _, g := range ic.Status.Gateways {
		s.Gateways = append(s.Gateways, g.Node)
	}
	for _, p := range ic.Status.Peers {
		s.Peers = append(s.Peers, PeerAZStatus{AZ: p.AZ, Gateways: p.Gateways, Routes: p.Routes})
	}
	if c := meta.FindStatusCondition(ic.Status.Conditions, kovnv1.ConditionReady); c != nil {
		s.Ready, s.Reason, s.Message = string(c.Status), c.Reason, c.Message
		if c.Status != metav1.ConditionTrue {
			r.problem("interconnect/"+ic.Name, c.Reason+": "+c.Message, icFix(c.Reason))
		}
	}
	if c := meta.FindStatusCondition(ic.Status.Conditions, kovnv1.ConditionRoutesAccepted); c != nil && c.Status == metav1.ConditionFalse {
		s.Conflicts = c.Message
		r.problem("interconnect/"+ic.Name, "route conflict: "+c.Message,
			"give the clusters disjoint pod and service CIDRs, or refuse the overlapping prefix (spec.refuseCIDRs)")
	}
	if c := meta.FindStatusCondition(ic.Status.Conditions, kovnv1.ConditionCredentialsReady); c != nil && c.Status == metav1.ConditionFalse {
		r.problem("interconnect/"+ic.Name, "clusterset credentials: "+c.Message,
			"put this AZ's certificate (tls.crt, tls.key) and the clusterset CA (ca.crt) into the Secret named")
	}
	if c := meta.FindStatusCondition(ic.Status.Conditions, kovnv1.ConditionDegraded); c != nil && c.Status == metav1.ConditionTrue {
		r.problem("interconnect/"+ic.Name, "join record tampered with: "+c.Message,
			"find the AZ certificate that wrote IC-NB (the IC databases' logs name the client) and revoke it")
	}
	if len(s.Peers) == 0 && s.Ready == string(metav1.ConditionTrue) {
		r.problem("interconnect/"+ic.Name, "joined, but no other AZ is in the clusterset",
			"apply an InterConnect with the same icNorthbound/icSouthbound in the other clusters")
	}
	r.Interconnect = s
}

func icFix(reason string) string {
	switch reason {
	case kovnv1.ReasonICUnreachable:
		return "check the OVN-IC databases named in spec.icNorthbound/icSouthbound (their pods or hosts, the network to them)"
	case kovnv1.ReasonNoGateway:
		return "label gateway nodes or set spec.gatewayNodes to nodes that exist"
	case kovnv1.ReasonWaitingForOVNIC:
		return "check ovn-ic in kube-system (container ovn-ic of kovn-ovn-central) and the gateways' ovn-controllers"
	}
	return "kubectl describe interconnect default (events)"
}

func (r *Report) mcs(in Inputs) {
	for i := range in.Exports {
		e := &in.Exports[i]
		conds := e.Status.Conditions
		s := ExportStatus{Name: e.Namespace + "/" + e.Name, State: kovnv1.ExportState(conds)}
		switch s.State {
		case kovnv1.ExportStateInvalid:
			s.Why = meta.FindStatusCondition(conds, string(mcsv1.ServiceExportConditionValid)).Message
			r.problem("serviceexport/"+s.Name, "not exported: "+s.Why, "create the Service, or delete the ServiceExport")
		case kovnv1.ExportStateConflict:
			s.Why = meta.FindStatusCondition(conds, string(mcsv1.ServiceExportConditionConflict)).Message
			r.problem("serviceexport/"+s.Name, "conflict: "+s.Why, "make the Service the same in every exporting cluster")
		case kovnv1.ExportStatePending:
			if c := meta.FindStatusCondition(conds, string(mcsv1.ServiceExportConditionReady)); c != nil {
				s.Why = c.Message
			}
		}
		r.Exports = append(r.Exports, s)
	}
	for i := range in.Imports {
		im := &in.Imports[i]
		s := ImportStatus{Name: im.Namespace + "/" + im.Name, Type: string(im.Spec.Type), IPs: im.Spec.IPs}
		for _, c := range im.Status.Clusters {
			s.Clusters = append(s.Clusters, c.Cluster)
		}
		r.Imports = append(r.Imports, s)
	}
}

func (r *Report) bgp(in Inputs) {
	for i := range in.BgpPeers {
		p := &in.BgpPeers[i]
		for _, n := range p.Status.Nodes {
			s := BGPSessionStatus{Peer: p.Name, Node: n.Node, State: string(n.State), Sent: n.PrefixesSent,
				Received: n.PrefixesReceived, Error: n.LastError}
			if n.State != kovnv1.BgpStateEstablished {
				why := "session " + s.State
				if n.LastError != "" {
					why += ": " + n.LastError
				}
				r.problem("bgppeer/"+p.Name, fmt.Sprintf("%s on %s", why, n.Node),
					"check the peer's address, AS and password, and the router's side; kubectl describe bgppeer "+p.Name)
			}
			r.BGP = append(r.BGP, s)
		}
	}
}

// Summary is one line: healthy, or how many problems and the first.
func (r Report) Summary() string {
	if len(r.Problems) == 0 {
		return "kovn is healthy"
	}
	objs := make([]string, 0, len(r.Problems))
	for _, p := range r.Problems {
		objs = append(objs, p.Object)
	}
	objs = slices.Compact(objs)
	return fmt.Sprintf("%d problem(s): %s", len(r.Problems), strings.Join(objs, ", "))
}
