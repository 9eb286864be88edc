package servicenat

import (
	"context"
	"errors"
	"maps"
	"net/netip"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	kovnv1 "github.com/kovn/kovn/api/v1alpha1"
	"github.com/kovn/kovn/pkg/annotation"
	"github.com/kovn/kovn/pkg/contract"
	"github.com/kovn/kovn/pkg/endpoints"
	"github.com/kovn/kovn/pkg/hostnet"
	"github.com/kovn/kovn/pkg/node/proxyhealth"
)

// NodePortReconciler keeps the node's NodePort and external IP translation (nodeports.go)
// equal to the cluster's Services. Every event means "recompute everything": the rules are a
// pure function of all Services, and they are rewritten only when their text changes.
type NodePortReconciler struct {
	client.Client
	NodeName string
	// JoinSubnet names the join Subnet, whose CIDRs the node's masquerade rules need.
	JoinSubnet string
	// Nodes caches every Node's addresses (NodeAddressCache), for the other nodes' ETP=Local
	// NodePorts (NodePortService.Peers); nil: no such rules.
	Nodes cache.Cache
	// Health follows the programming for the proxy health port; HealthChecks serves the ETP=Local
	// LoadBalancer Services' health check node ports. Either may be nil.
	Health       *proxyhealth.Tracker
	HealthChecks *proxyhealth.HealthCheckPorts
	// ExternalIPCIDRs are the admin's ranges for spec.externalIPs (kovn-controller's flag of
	// the same name); ServiceCIDRs the cluster's Service ranges. See contract.ExternalIPRules.
	ExternalIPCIDRs, ServiceCIDRs []netip.Prefix
	// Apply writes one family's rules; nil: iptables / ip6tables.
	Apply func(is4 bool, rules string) error
	// SyncOwnPods makes the family's OwnPodsSet hold the addresses of this node's pods; nil:
	// the node's ipsets. It runs before Apply, whose rules match the set.
	SyncOwnPods func(is4 bool, addrs []netip.Addr) error

	chains familyChains
	// ownPods syncs each family's OwnPodsSet only when its addresses changed since the last
	// successful sync.
	ownPods familyChains
}

// +kubebuilder:rbac:groups="",resources=services,verbs=get;list;watch
// +kubebuilder:rbac:groups=discovery.k8s.io,resources=endpointslices,verbs=get;list;watch

// Reconcile implements reconcile.Reconciler.
func (r *NodePortReconciler) Reconcile(ctx context.Context, _ ctrl.Request) (ctrl.Result, error) {
	if r.Health != nil {
		r.Health.Queued()
	}
	var subnets kovnv1.SubnetList
	var ips kovnv1.IPList
	if err := r.List(ctx, &subnets); err != nil {
		return ctrl.Result{}, err
	}
	if err := r.List(ctx, &ips); err != nil { // the daemon caches its own node's only
		return ctrl.Result{}, err
	}
	addrs, err := r.nodeAddrs(ctx)
	if err != nil {
		return ctrl.Result{}, err
	}
	svcs, err := r.nodePortServices(ctx, subnets.Items, addrs)
	if err != nil {
		return ctrl.Result{}, err
	}
	peers := maps.Clone(addrs)
	delete(peers, r.NodeName)
	side := NodeSide{KeepSource: keepSourcePrefixes(subnets.Items, ips.Items, r.NodeName), Join: joinPrefixes(subnets.Items, r.JoinSubnet),
		Masq: masqAddrsIn(ips.Items, r.NodeName), PeerAddrs: peers}
	apply, syncOwn := r.Apply, r.SyncOwnPods
	if apply == nil {
		apply = ApplyNodePortRules
	}
	if syncOwn == nil {
		syncOwn = SyncOwnPodsSet
	}
	var own []netip.Addr
	for _, p := range localPodPrefixes(ips.Items, r.NodeName, nil) {
		own = append(own, p.Addr())
	}
	if err := r.syncOwnPods(syncOwn, own); err != nil {
		return ctrl.Result{}, err // the rules would match a set that is not there or not right
	}
	err = r.chains.sync(func(is4 bool) string { return NodePortRules(is4, svcs, side) }, apply)
	if err == nil && r.Health != nil {
		r.Health.Programmed()
	}
	if r.HealthChecks != nil {
		err = errors.Join(err, r.HealthChecks.Sync(healthChecks(svcs)))
	}
	return ctrl.Result{}, err
}

// syncOwnPods syncs each family's OwnPodsSet whose addresses changed since its last sync.
func (r *NodePortReconciler) syncOwnPods(syncOwn func(bool, []netip.Addr) error, own []netip.Addr) error {
	slices.SortFunc(own, netip.Addr.Compare)
	members := func(is4 bool) string {
		var key strings.Builder
		key.WriteString("set:") // never "", so that an empty set is synced once too
		for _, a := range own {
			if a.Is4() == is4 {
				key.WriteString(a.String())
				key.WriteByte(' ')
			}
		}
		return key.String()
	}
	return r.ownPods.sync(members, func(is4 bool, _ string) error { return syncOwn(is4, own) })
}

// healthChecks are the health check node ports this node answers, with its ready endpoints.
func healthChecks(svcs []NodePortService) []proxyhealth.ServiceHealth {
	var out []proxyhealth.ServiceHealth
	for _, s := range svcs {
		if s.HealthCheckNodePort > 0 {
			ns, name, _ := strings.Cut(s.Key, "/")
			out = append(out, proxyhealth.ServiceHealth{Namespace: ns, Name: name, Port: s.HealthCheckNodePort, LocalEndpoints: s.LocalReady})
		}
	}
	return out
}

// keepSourcePrefixes are the destinations traffic entering the overlay here reaches without
// being masqueraded (see nodeports.go): this node's pods in default-VPC subnets with a
// distributed gateway, whose replies leave through this node.
func keepSourcePrefixes(subnets []kovnv1.Subnet, ips []kovnv1.IP, node string) []netip.Prefix {
	localPods := map[string]bool{}
	for i := range subnets {
		sn := &subnets[i]
		if sn.VpcName() == kovnv1.DefaultVpcName && sn.Spec.Vlan == "" && sn.Spec.EffectiveGatewayType() == kovnv1.GatewayDistributed {
			localPods[sn.Name] = true
		}
	}
	return localPodPrefixes(ips, node, func(subnet string) bool { return localPods[subnet] })
}

// localPodPrefixes are the addresses (as host prefixes) of the pods on node, of the subnets
// inSubnet accepts (nil: every subnet).
func localPodPrefixes(ips []kovnv1.IP, node string, inSubnet func(string) bool) []netip.Prefix {
	var out []netip.Prefix
	for i := range ips {
		ip := &ips[i].Spec
		if ip.PodName == "" || ip.NodeName != node || (inSubnet != nil && !inSubnet(ip.Subnet)) {
			continue
		}
		for _, s := range []string{ip.V4IP, ip.V6IP} {
			if a, err := netip.ParseAddr(s); err == nil {
				out = append(out, netip.PrefixFrom(a, a.BitLen()))
			}
		}
	}
	return out
}

// nodePortServices lists the Services that reach into the cluster through this node.
func (r *NodePortReconciler) nodePortServices(ctx context.Context, subnets []kovnv1.Subnet, nodeAddrs map[string][]netip.Addr) ([]NodePortService, error) {
	var list corev1.ServiceList
	if err := r.List(ctx, &list); err != nil {
		return nil, err
	}
	inCluster := subnetPrefixes(subnets)
	// The controller's rules for spec.externalIPs: the node translates (for the traffic it
	// receives and its own) exactly the addresses OVN balances.
	rules := contract.ExternalIPRules{Allowed: r.ExternalIPCIDRs, Reserved: append(slices.Clone(inCluster), r.ServiceCIDRs...)}
	for _, as := range nodeAddrs {
		rules.NodeAddrs = append(rules.NodeAddrs, as...)
	}
	claims := rules.Claims(list.Items)
	bySvc, err := r.endpointsByService(ctx)
	if err != nil {
		return nil, err
	}
	var out []NodePortService
	for i := range list.Items {
		svc := &list.Items[i]
		eps := bySvc[svc.Namespace+"/"+svc.Name]
		external, _ := rules.ExternalIPs(svc, claims)
		s, ok := nodePortService(svc, inCluster, external)
		s.HostEndpoints = hostEndpoints(svc, eps, r.NodeName, inCluster)
		if !ok && len(s.HostEndpoints) == 0 {
			continue
		}
		if s.LocalOnly {
			s.Peers = peerEndpoints(eps, r.NodeName)
		}
		if s.LocalOnly || s.OutsideClusterIPs || s.HealthCheckNodePort > 0 {
			var ready bool
			s.LocalEndpoints, ready = localEndpoints(eps, r.NodeName)
			if ready {
				s.LocalReady = endpointCount(s.LocalEndpoints)
			}
		}
		out = append(out, s)
	}
	return out, nil
}

// endpointsByService reads every EndpointSlice once, by "namespace/service".
func (r *NodePortReconciler) endpointsByService(ctx context.Context) (map[string][]LocalEndpoint, error) {
	var slices discoveryv1.EndpointSliceList
	if err := r.List(ctx, &slices); err != nil {
		return nil, err
	}
	by := map[string][]discoveryv1.EndpointSlice{}
	for _, sl := range slices.Items {
		if name := sl.Labels[discoveryv1.LabelServiceName]; name != "" {
			by[sl.Namespace+"/"+name] = append(by[sl.Namespace+"/"+name], sl)
		}
	}
	out := make(map[string][]LocalEndpoint, len(by))
	for k, sls := range by {
		out[k] = endpoints.FromSlices(sls)
	}
	return out, nil
}

// hostEndpoints are the endpoints the node's own traffic to the Service's ClusterIPs is sent to
// by the node itself, when one of them is this node's own address (a hostNetwork pod here);
// nil otherwise, and OVN's load balancer serves the node as any client.
//
// The node reaches ClusterIPs through ovn0, from its ovn0 address. A load balancer that picks
// the node's own address sends the packet back out of ovn0 with that source: the kernel drops
// it as a martian (its own address arriving from outside), so a node could not reach a Service
// served from its own host network (Kubernetes' e2e "internalTrafficPolicy=Local Pod and Node,
// to Pod (hostNetwork: true)"). For those Services only the node's packets are translated here,
// as kube-proxy would: the node's own endpoint delivered locally, the others through ovn0.
// internalTrafficPolicy=Local keeps to this node's endpoints.
func hostEndpoints(svc *corev1.Service, eps []LocalEndpoint, node string, inCluster []netip.Prefix) []LocalEndpoint {
	if !contract.ServedByKovn(svc.Labels) || len(svc.Spec.ClusterIPs) == 0 || svc.Spec.ClusterIP == corev1.ClusterIPNone {
		return nil
	}
	itpLocal := svc.Spec.InternalTrafficPolicy != nil && *svc.Spec.InternalTrafficPolicy == corev1.ServiceInternalTrafficPolicyLocal
	usable, _ := endpoints.Usable(eps, func(e LocalEndpoint) bool { return !itpLocal || e.Node == node })
	onHost := slices.ContainsFunc(usable, func(e LocalEndpoint) bool {
		return e.Node == node && !slices.ContainsFunc(inCluster, func(p netip.Prefix) bool { return p.Contains(e.Addr) })
	})
	if !onHost {
		return nil
	}
	return usable
}

// joinPrefixes are the join Subnet's CIDRs (none while it is not listed or not valid).
func joinPrefixes(subnets []kovnv1.Subnet, join string) []netip.Prefix {
	for i := range subnets {
		if subnets[i].Name == join {
			cidrs, _ := subnets[i].Spec.CIDRs()
			return cidrs
		}
	}
	return nil
}

// subnetPrefixes are the CIDRs of every Subnet, whatever its VPC or state.
func subnetPrefixes(subnets []kovnv1.Subnet) []netip.Prefix {
	var out []netip.Prefix
	for i := range subnets {
		if cidrs, err := subnets[i].Spec.CIDRs(); err == nil {
			out = append(out, cidrs...)
		}
	}
	return out
}

// nodePortService reads a Service; false when nothing reaches it through a node. external are
// its spec.externalIPs the rules honour (contract.ExternalIPRules); load balancer ingress
// addresses inside inCluster (a Subnet's CIDRs) are left out: translating them would hand a
// pod's or a node's traffic to the Service (kovn-controller refuses them with an event).
func nodePortService(svc *corev1.Service, inCluster []netip.Prefix, external []netip.Addr) (NodePortService, bool) {
	if !contract.ServedByKovn(svc.Labels) { // another proxy's, or headless by label
		return NodePortService{}, false
	}
	etpLocal := svc.Spec.ExternalTrafficPolicy == corev1.ServiceExternalTrafficPolicyLocal
	s := NodePortService{Key: svc.Namespace + "/" + svc.Name, LocalOnly: etpLocal,
		OutsideClusterIPs: annotation.BGPServicePolicy(svc.Annotations[annotation.BGP], etpLocal) == annotation.BGPLocal}
	if etpLocal {
		s.PodSources = inCluster
		if svc.Spec.Type == corev1.ServiceTypeLoadBalancer {
			s.HealthCheckNodePort = svc.Spec.HealthCheckNodePort
		}
	}
	for _, ip := range svc.Spec.ClusterIPs {
		if a, err := netip.ParseAddr(ip); err == nil {
			s.ClusterIPs = append(s.ClusterIPs, a)
		}
	}
	s.ExternalIPs = slices.Clone(external)
	for _, ing := range svc.Status.LoadBalancer.Ingress {
		if a, err := netip.ParseAddr(ing.IP); err == nil && !slices.ContainsFunc(inCluster, func(p netip.Prefix) bool { return p.Contains(a) }) {
			s.ExternalIPs = append(s.ExternalIPs, a)
		}
	}
	hasNodePort := false
	for _, p := range svc.Spec.Ports {
		proto := string(p.Protocol)
		if proto == "" {
			proto = string(corev1.ProtocolTCP)
		}
		s.Ports = append(s.Ports, NodePortPort{Name: p.Name, Protocol: proto, Port: p.Port, NodePort: p.NodePort})
		hasNodePort = hasNodePort || p.NodePort > 0
	}
	return s, len(s.ClusterIPs) > 0 && (hasNodePort || len(s.ExternalIPs) > 0 || s.OutsideClusterIPs || s.HealthCheckNodePort > 0)
}

// localEndpoints are the endpoints of the slices on node that take new connections, and
// whether they are ready ones (endpoints.Usable: when none is ready, the serving terminating
// ones, so a rolling update's last local pod carries the node's traffic until it is gone).
func localEndpoints(eps []LocalEndpoint, node string) (local []LocalEndpoint, ready bool) {
	return endpoints.Usable(eps, func(e LocalEndpoint) bool { return e.Node == node })
}

// peerEndpoints are the endpoints of every other node that take new connections (ready ones,
// else serving terminating ones: the rule that node applies to its own endpoints), by node.
func peerEndpoints(eps []LocalEndpoint, node string) []PeerEndpoints {
	byNode := map[string][]LocalEndpoint{}
	for _, e := range eps {
		if e.Node != "" && e.Node != node {
			byNode[e.Node] = append(byNode[e.Node], e)
		}
	}
	var out []PeerEndpoints
	for _, n := range slices.Sorted(maps.Keys(byNode)) {
		if usable, _ := endpoints.Usable(byNode[n], func(LocalEndpoint) bool { return true }); len(usable) > 0 {
			out = append(out, PeerEndpoints{Node: n, Endpoints: usable})
		}
	}
	return out
}

// nodeAddrs are every node's InternalIP and ExternalIP addresses, by node name, each node's
// sorted and each once.
func (r *NodePortReconciler) nodeAddrs(ctx context.Context) (map[string][]netip.Addr, error) {
	if r.Nodes == nil {
		return nil, nil
	}
	var nodes corev1.NodeList
	if err := r.Nodes.List(ctx, &nodes); err != nil {
		return nil, err
	}
	out := map[string][]netip.Addr{}
	for _, n := range nodes.Items {
		for _, a := range n.Status.Addresses {
			if ip, err := netip.ParseAddr(a.Address); err == nil && (a.Type == corev1.NodeInternalIP || a.Type == corev1.NodeExternalIP) {
				out[n.Name] = append(out[n.Name], ip)
			}
		}
		slices.SortFunc(out[n.Name], netip.Addr.Compare)
		out[n.Name] = slices.Compact(out[n.Name])
	}
	return out, nil
}

// NodeAddressCache caches every Node with its name and addresses only, so that a daemon's
// memory grows by a few bytes per node, not by each Node's images and conditions (the
// manager's cache holds only the daemon's own Node). Add it to the manager to start it.
func NodeAddressCache(cfg *rest.Config, scheme *runtime.Scheme, mapper meta.RESTMapper) (cache.Cache, error) {
	return cache.New(cfg, cache.Options{Scheme: scheme, Mapper: mapper, ByObject: map[client.Object]cache.ByObject{
		&corev1.Node{}: {Transform: nodeAddressesOnly},
	}})
}

func nodeAddressesOnly(obj any) (any, error) {
	n, ok := obj.(*corev1.Node)
	if !ok { // a tombstone
		return obj, nil
	}
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n.Name, UID: n.UID, ResourceVersion: n.ResourceVersion},
		Status: corev1.NodeStatus{Addresses: n.Status.Addresses}}, nil
}

// endpointCount counts endpoints, not addresses: a dual-stack Service lists each pod in one
// EndpointSlice per family, so the larger family's count is the number of endpoints.
func endpointCount(eps []LocalEndpoint) int {
	var v4, v6 int
	for _, e := range eps {
		if e.Addr.Is4() {
			v4++
		} else {
			v6++
		}
	}
	return max(v4, v6)
}

// ApplyNodePortRules makes sure the chains exist and are jumped to, then rewrites them.
func ApplyNodePortRules(is4 bool, rules string) error {
	return applyChains(is4, []chainJump{{"nat", "PREROUTING", nodePortChain}, {"nat", "OUTPUT", nodePortChain},
		{"nat", "POSTROUTING", nodePortMasqChain}, {"filter", "INPUT", nodePortRejectChain}, {"filter", "FORWARD", nodePortRejectChain}}, rules)
}

// SyncOwnPodsSet makes the node's OwnPodsSet of the family hold addrs.
func SyncOwnPodsSet(is4 bool, addrs []netip.Addr) error {
	return hostnet.SyncAddrSet(OwnPodsSet(is4), is4, addrs)
}

// SetupWithManager: every Service or EndpointSlice event enqueues the one key.
func (r *NodePortReconciler) SetupWithManager(mgr ctrl.Manager) error {
	one := handler.EnqueueRequestsFromMapFunc(func(context.Context, client.Object) []reconcile.Request {
		return []reconcile.Request{{NamespacedName: types.NamespacedName{Name: "nodeports"}}}
	})
	b := ctrl.NewControllerManagedBy(mgr).Named("nodeports").
		Watches(&corev1.Service{}, one).Watches(&discoveryv1.EndpointSlice{}, one).
		Watches(&kovnv1.Subnet{}, one).Watches(&kovnv1.IP{}, one)
	if r.Nodes != nil {
		toKey := handler.TypedEnqueueRequestsFromMapFunc(func(context.Context, *corev1.Node) []reconcile.Request {
			return []reconcile.Request{{NamespacedName: types.NamespacedName{Name: "nodeports"}}}
		})
		addressesChanged := predicate.TypedFuncs[*corev1.Node]{UpdateFunc: func(e event.TypedUpdateEvent[*corev1.Node]) bool {
			return !slices.Equal(e.ObjectOld.Status.Addresses, e.ObjectNew.Status.Addresses)
		}}
		b = b.WatchesRawSource(source.Kind(r.Nodes, &corev1.Node{}, toKey, addressesChanged))
	}
	return b.Complete(r)
}
