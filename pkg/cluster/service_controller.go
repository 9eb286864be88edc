package cluster

import (
	"context"
	"fmt"
	"net/netip"
	"slices"

	libovsdb "github.com/ovn-org/libovsdb/client"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/kovn/kovn/pkg/cluster/topology"
	"github.com/kovn/kovn/pkg/contract"
	"github.com/kovn/kovn/pkg/endpoints"
)

// ServiceReconciler makes each Service's OVN load balancers match the Service and its
// EndpointSlices: kovn is the cluster's Service implementation (no kube-proxy). One
// reconcile applies one Service's shard in one transaction; an unchanged Service costs none.
type ServiceReconciler struct {
	client.Client
	// State gives the Subnets' CIDRs: an external address inside one is refused.
	State *State
	// ExternalIPCIDRs are the admin's ranges for spec.externalIPs (--external-ip-cidrs);
	// empty: none is honoured.
	ExternalIPCIDRs []netip.Prefix
	NB              libovsdb.Client
	Recorder        record.EventRecorder
	// Clusters (nil outside a clusterset) leaves unreachable clusters' imported endpoints out.
	Clusters ClusterHealth
}

// +kubebuilder:rbac:groups="",resources=services,verbs=get;list;watch
// +kubebuilder:rbac:groups=discovery.k8s.io,resources=endpointslices,verbs=get;list;watch

// Reconcile implements reconcile.Reconciler.
func (r *ServiceReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	// Which external addresses to refuse depends on the subnets the leader restored: before
	// that, a Service's address inside a subnet would be programmed (and its pod's traffic
	// captured) until the subnets are known, and rewritten after.
	if r.State != nil {
		if err := r.State.WaitRestored(ctx); err != nil {
			return ctrl.Result{}, err
		}
	}
	owner := req.Namespace + "/" + req.Name
	var svc corev1.Service
	if err := r.Get(ctx, req.NamespacedName, &svc); err != nil {
		if client.IgnoreNotFound(err) != nil {
			return ctrl.Result{}, err
		}
		return applyShard(ctx, r.NB, emptyShard(topology.OwnerService, owner))
	}
	in, ok := serviceIn(&svc)
	external, refusals, err := r.externalIPs(ctx, &svc)
	if err != nil {
		return ctrl.Result{}, err
	}
	in.VIPs = slices.Insert(in.VIPs, min(in.NClusterIPs, len(in.VIPs)), external...)
	var lbRefusals []string
	in.VIPs, lbRefusals = r.refuseInClusterVIPs(in.VIPs, in.NClusterIPs)
	refusals = append(refusals, lbRefusals...)
	if in.InternalLocal {
		if in.Chassis, err = r.chassisNames(ctx); err != nil {
			return ctrl.Result{}, err
		}
	}
	for _, msg := range refusals {
		if r.Recorder != nil {
			r.Recorder.Event(&svc, corev1.EventTypeWarning, "ServicePartlyProgrammed", msg)
		}
	}
	if !ok { // headless or ExternalName: nothing to balance
		return applyShard(ctx, r.NB, emptyShard(topology.OwnerService, owner))
	}
	var sliceList discoveryv1.EndpointSliceList
	if err := r.List(ctx, &sliceList, client.InNamespace(svc.Namespace),
		client.MatchingLabels{discoveryv1.LabelServiceName: svc.Name}); err != nil {
		return ctrl.Result{}, err
	}
	in.Endpoints = endpoints.FromSlices(reachableSlices(sliceList.Items, r.Clusters))
	res, err := applyShard(ctx, r.NB, topology.ForService(in))
	if err != nil && r.Recorder != nil {
		r.Recorder.Eventf(&svc, corev1.EventTypeWarning, "ServiceNotProgrammed", "OVN load balancers not updated: %v", err)
	}
	return res, err
}

// refuseInClusterVIPs drops external addresses (spec.externalIPs, load balancer ingress: the
// VIPs after the first nClusterIPs) that fall inside a Subnet of the cluster. A Service is user
// input: with such an address its load balancer would capture traffic meant for a pod or a
// node's join address (CVE-2020-8554). It returns the VIPs kept and why others were refused.
func (r *ServiceReconciler) refuseInClusterVIPs(vips []netip.Addr, nClusterIPs int) ([]netip.Addr, []string) {
	if r.State == nil || len(vips) <= nClusterIPs {
		return vips, nil
	}
	kept := append([]netip.Addr(nil), vips[:nClusterIPs]...)
	var refused []string
	for _, vip := range vips[nClusterIPs:] {
		if sn, cidr, ok := r.subnetHolding(vip); ok {
			refused = append(refused, fmt.Sprintf("external address %s refused: it is inside subnet %s (%s)", vip, sn, cidr))
			continue
		}
		kept = append(kept, vip)
	}
	return kept, refused
}

func (r *ServiceReconciler) subnetHolding(a netip.Addr) (string, netip.Prefix, bool) {
	for _, sn := range r.State.Subnets() {
		for _, c := range sn.CIDRs {
			if c.Contains(a) {
				return sn.Name, c, true
			}
		}
	}
	if join := r.State.Join(); join != nil {
		for _, c := range join.CIDRs {
			if c.Contains(a) {
				return join.Name, c, true
			}
		}
	}
	return "", netip.Prefix{}, false
}

// externalIPs are the Service's spec.externalIPs kovn honours (contract.ExternalIPRules: the
// admin's ranges, never the cluster's own ranges, a node, a ClusterIP or an address another
// Service claimed first) and why others were refused. The Service and Node lists are read only
// for a Service that names external IPs.
func (r *ServiceReconciler) externalIPs(ctx context.Context, svc *corev1.Service) ([]netip.Addr, []string, error) {
	if len(svc.Spec.ExternalIPs) == 0 || !contract.ServedByKovn(svc.Labels) {
		return nil, nil, nil
	}
	var subnetRefused []string
	var candidates []string
	for _, ip := range svc.Spec.ExternalIPs {
		if a, err := netip.ParseAddr(ip); err == nil && r.State != nil {
			if sn, cidr, in := r.subnetHolding(a); in {
				subnetRefused = append(subnetRefused, fmt.Sprintf("external address %s refused: it is inside subnet %s (%s)", a, sn, cidr))
				continue
			}
		}
		candidates = append(candidates, ip)
	}
	rules := contract.ExternalIPRules{Allowed: r.ExternalIPCIDRs}
	var nodes corev1.NodeList
	if err := r.List(ctx, &nodes); err != nil {
		return nil, nil, err
	}
	for _, n := range nodes.Items {
		for _, a := range n.Status.Addresses {
			if ip, err := netip.ParseAddr(a.Address); err == nil {
				rules.NodeAddrs = append(rules.NodeAddrs, ip)
			}
		}
	}
	var all corev1.ServiceList
	if err := r.List(ctx, &all); err != nil {
		return nil, nil, err
	}
	checked := svc.DeepCopy()
	checked.Spec.ExternalIPs = candidates
	kept, refused := rules.ExternalIPs(checked, rules.Claims(all.Items))
	return kept, append(subnetRefused, refused...), nil
}

// chassisNames are the OVN chassis of every node: a node's chassis is named after it.
func (r *ServiceReconciler) chassisNames(ctx context.Context) ([]string, error) {
	var nodes corev1.NodeList
	if err := r.List(ctx, &nodes); err != nil {
		return nil, err
	}
	names := make([]string, 0, len(nodes.Items))
	for _, n := range nodes.Items {
		names = append(names, n.Name)
	}
	return names, nil
}

// serviceIn reads what the load balancers need from a Service; false when it has no virtual
// IP to balance (headless, ExternalName) or is not kovn's to serve (labelled for another
// service proxy, or headless by label, as kube-proxy reads them).
func serviceIn(svc *corev1.Service) (topology.ServiceIn, bool) {
	in := topology.ServiceIn{Namespace: svc.Namespace, Name: svc.Name}
	if svc.Spec.Type == corev1.ServiceTypeExternalName || !contract.ServedByKovn(svc.Labels) {
		return in, false
	}
	for _, ip := range svc.Spec.ClusterIPs {
		if a, err := netip.ParseAddr(ip); err == nil {
			in.VIPs = append(in.VIPs, a)
		}
	}
	if len(in.VIPs) == 0 {
		return in, false // ClusterIP None
	}
	in.NClusterIPs = len(in.VIPs)
	itp := svc.Spec.InternalTrafficPolicy
	in.InternalLocal = itp != nil && *itp == corev1.ServiceInternalTrafficPolicyLocal
	// spec.externalIPs join the VIPs after the ClusterIPs once checked (externalIPs).
	for _, ing := range svc.Status.LoadBalancer.Ingress {
		if a, err := netip.ParseAddr(ing.IP); err == nil {
			in.VIPs = append(in.VIPs, a)
		}
	}
	for _, p := range svc.Spec.Ports {
		proto := string(p.Protocol)
		if proto == "" {
			proto = string(corev1.ProtocolTCP)
		}
		in.Ports = append(in.Ports, topology.ServicePortIn{Name: p.Name, Protocol: proto, Port: p.Port})
	}
	if svc.Spec.SessionAffinity == corev1.ServiceAffinityClientIP {
		in.AffinityTimeout = corev1.DefaultClientIPServiceAffinitySeconds
		if c := svc.Spec.SessionAffinityConfig; c != nil && c.ClientIP != nil && c.ClientIP.TimeoutSeconds != nil {
			in.AffinityTimeout = *c.ClientIP.TimeoutSeconds
		}
	}
	return in, true
}

// sharingExternalIPs are the other Services naming one of o's external IPs: when o goes or
// lets an address go, the next claimant gets it (contract.ExternalIPRules.Claims).
func sharingExternalIPs(ctx context.Context, c client.Reader, o client.Object) []reconcile.Request {
	svc, ok := o.(*corev1.Service)
	if !ok || len(svc.Spec.ExternalIPs) == 0 {
		return nil
	}
	var svcs corev1.ServiceList
	if err := c.List(ctx, &svcs); err != nil {
		return nil
	}
	var reqs []reconcile.Request
	for _, s := range svcs.Items {
		if (s.Namespace != svc.Namespace || s.Name != svc.Name) &&
			slices.ContainsFunc(s.Spec.ExternalIPs, func(ip string) bool { return slices.Contains(svc.Spec.ExternalIPs, ip) }) {
			reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: s.Namespace, Name: s.Name}})
		}
	}
	return reqs
}

// servicesNodesConcern are the Services a node's coming, going or new addresses concern:
// internalTrafficPolicy=Local ones and those naming external IPs.
func servicesNodesConcern(svcs []corev1.Service) []reconcile.Request {
	var reqs []reconcile.Request
	for _, s := range svcs {
		if itp := s.Spec.InternalTrafficPolicy; (itp != nil && *itp == corev1.ServiceInternalTrafficPolicyLocal) || len(s.Spec.ExternalIPs) > 0 {
			reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: s.Namespace, Name: s.Name}})
		}
	}
	return reqs
}

// nodeAddressesChanged passes a Node update only when its addresses changed (not its
// heartbeats).
func nodeAddressesChanged(e event.UpdateEvent) bool {
	o, ok1 := e.ObjectOld.(*corev1.Node)
	n, ok2 := e.ObjectNew.(*corev1.Node)
	return ok1 && ok2 && !slices.Equal(o.Status.Addresses, n.Status.Addresses)
}

// SetupWithManager watches Services and their EndpointSlices (by the service-name label).
func (r *ServiceReconciler) SetupWithManager(mgr ctrl.Manager) error {
	toService := handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
		name := o.GetLabels()[discoveryv1.LabelServiceName]
		if name == "" {
			return nil
		}
		return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: o.GetNamespace(), Name: name}}}
	})
	// A node that comes or goes, or whose addresses change, changes what some Services get:
	// their backend lists (internalTrafficPolicy=Local: each chassis has its own) and which
	// external IPs are honoured (never a node's address); other Services do not care.
	nodeChanged := handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, _ client.Object) []reconcile.Request {
		var svcs corev1.ServiceList
		if err := mgr.GetClient().List(ctx, &svcs); err != nil {
			return nil
		}
		return servicesNodesConcern(svcs.Items)
	})
	b := ctrl.NewControllerManagedBy(mgr).Named("service").For(&corev1.Service{}).
		Watches(&corev1.Service{}, handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
			return sharingExternalIPs(ctx, mgr.GetClient(), o)
		})).
		Watches(&discoveryv1.EndpointSlice{}, toService).
		Watches(&corev1.Node{}, nodeChanged, builder.WithPredicates(predicate.Funcs{UpdateFunc: nodeAddressesChanged}))
	if r.Clusters != nil {
		b = b.WatchesRawSource(healthSource(r.Clusters, mgr.GetClient()))
	}
	return b.WithOptions(controller.Options{MaxConcurrentReconciles: 4}).Complete(r)
}
