package node

import (
	"context"
	"fmt"
	"net/netip"
	"sync"
	"time"

	libovsdb "github.com/ovn-org/libovsdb/client"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	kovnv1 "github.com/kovn/kovn/api/v1alpha1"
	"github.com/kovn/kovn/pkg/annotation"
	"github.com/kovn/kovn/pkg/cluster/topology"
)

// Config is kovn-daemon's node configuration.
type Config struct {
	NodeName   string
	Bridge     string // br-int
	MTU        int
	CNIConfDir string
	CNISocket  string
	JoinSubnet string
	OVNRemote  string // southbound DB for ovn-controller; empty: leave what is configured
	Netdev     bool   // userspace OVS datapath
}

// Reconciler keeps the node plumbed: ovn0, routes to every valid subnet, SNAT for natOutgoing
// subnets, and the CNI config (written last, so the node turns Ready only when pods can work).
type Reconciler struct {
	client.Client
	OVS libovsdb.Client
	Cfg Config

	mu    sync.Mutex
	ready bool
}

// Ready reports whether the node finished its first successful bootstrap.
func (r *Reconciler) Ready() bool { r.mu.Lock(); defer r.mu.Unlock(); return r.ready }

// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=nodes,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=kovn.io,resources=subnets,verbs=get;list;watch

// Reconcile implements reconcile.Reconciler; every request means "sync this node".
func (r *Reconciler) Reconcile(ctx context.Context, _ ctrl.Request) (ctrl.Result, error) {
	var node corev1.Node
	if err := r.Get(ctx, types.NamespacedName{Name: r.Cfg.NodeName}, &node); err != nil {
		return ctrl.Result{}, err
	}
	if err := r.ensureChassis(ctx, &node); err != nil {
		return ctrl.Result{}, err
	}
	jc, ok, err := joinConfig(&node, r.Cfg.MTU)
	if err != nil {
		return ctrl.Result{}, err
	}
	if !ok {
		log.FromContext(ctx).Info("waiting for kovn-controller to assign the join address", "node", node.Name)
		return ctrl.Result{RequeueAfter: time.Second}, nil
	}
	link, err := EnsureOvn0(ctx, r.OVS, r.Cfg.Bridge, jc)
	if err != nil {
		return ctrl.Result{}, err
	}
	routed, nat, all, err := r.subnetCIDRs(ctx)
	if err != nil {
		return ctrl.Result{}, err
	}
	if err := SyncRoutes(link, routed, jc.Gateways); err != nil {
		return ctrl.Result{}, err
	}
	if err := SyncNAT(nat, all); err != nil {
		return ctrl.Result{}, err
	}
	if err := EnableForwarding(); err != nil {
		return ctrl.Result{}, err
	}
	if err := WriteCNIConfig(r.Cfg.CNIConfDir, r.Cfg.CNISocket, r.Cfg.MTU); err != nil {
		return ctrl.Result{}, err
	}
	r.mu.Lock()
	r.ready = true
	r.mu.Unlock()
	return ctrl.Result{RequeueAfter: time.Minute}, nil
}

// ensureChassis registers the node as an OVN chassis named after it, tunnelling from its
// InternalIP, and records the chassis name on the Node.
func (r *Reconciler) ensureChassis(ctx context.Context, node *corev1.Node) error {
	var encap string
	for _, a := range node.Status.Addresses {
		if a.Type == corev1.NodeInternalIP && encap == "" {
			encap = a.Address
		}
	}
	if encap == "" {
		return fmt.Errorf("node %s has no InternalIP to use as tunnel endpoint", node.Name)
	}
	id := ChassisIdentity{SystemID: node.Name, OVNRemote: r.Cfg.OVNRemote, EncapIP: encap, Netdev: r.Cfg.Netdev}
	if err := EnsureChassisIdentity(ctx, r.OVS, id); err != nil {
		return fmt.Errorf("chassis identity in Open_vSwitch: %w", err)
	}
	if node.Annotations[annotation.Chassis] == node.Name {
		return nil
	}
	patch := client.MergeFrom(node.DeepCopy())
	if node.Annotations == nil {
		node.Annotations = map[string]string{}
	}
	node.Annotations[annotation.Chassis] = node.Name
	return r.Patch(ctx, node, patch)
}

// subnetCIDRs returns the CIDRs to route via ovn0 (every Ready subnet but join), those to
// masquerade (natOutgoing) and every cluster CIDR (not masqueraded as destinations).
func (r *Reconciler) subnetCIDRs(ctx context.Context) (routed, nat, all []netip.Prefix, err error) {
	var subnets kovnv1.SubnetList
	if err := r.List(ctx, &subnets); err != nil {
		return nil, nil, nil, err
	}
	for _, s := range subnets.Items {
		cidrs, err := s.Spec.CIDRs()
		if err != nil || !isReady(&s) {
			continue
		}
		all = append(all, cidrs...)
		if s.Name == r.Cfg.JoinSubnet {
			continue
		}
		routed = append(routed, cidrs...)
		if s.Spec.NATOutgoing {
			nat = append(nat, cidrs...)
		}
	}
	return routed, nat, all, nil
}

func isReady(s *kovnv1.Subnet) bool {
	for _, c := range s.Status.Conditions {
		if c.Type == kovnv1.ConditionReady {
			return c.Status == "True"
		}
	}
	return false
}

func joinConfig(n *corev1.Node, mtu int) (JoinConfig, bool, error) {
	a := n.Annotations
	if a[annotation.JoinIP] == "" || a[annotation.JoinMAC] == "" || a[annotation.JoinCIDR] == "" || a[annotation.JoinGateway] == "" {
		return JoinConfig{}, false, nil
	}
	ips, err := annotation.ParseAddrs(a[annotation.JoinIP])
	if err != nil {
		return JoinConfig{}, false, fmt.Errorf("node annotation %s: %w", annotation.JoinIP, err)
	}
	cidrs, err := annotation.ParsePrefixes(a[annotation.JoinCIDR])
	if err != nil || len(cidrs) != len(ips) {
		return JoinConfig{}, false, fmt.Errorf("node annotation %s: %q does not match %s", annotation.JoinCIDR, a[annotation.JoinCIDR], a[annotation.JoinIP])
	}
	gws, err := annotation.ParseAddrs(a[annotation.JoinGateway])
	if err != nil || len(gws) != len(ips) {
		return JoinConfig{}, false, fmt.Errorf("node annotation %s: %q does not match %s", annotation.JoinGateway, a[annotation.JoinGateway], a[annotation.JoinIP])
	}
	mac, err := annotation.ParseMAC(a[annotation.JoinMAC])
	if err != nil {
		return JoinConfig{}, false, fmt.Errorf("node annotation %s: %w", annotation.JoinMAC, err)
	}
	jc := JoinConfig{Gateways: gws, MAC: mac, IfaceID: topology.NodePortName(n.Name), MTU: mtu}
	for i, ip := range ips {
		if cidrs[i].Addr().Is4() != ip.Is4() || gws[i].Is4() != ip.Is4() {
			return JoinConfig{}, false, fmt.Errorf("node join annotations mix address families: ip %s, cidr %s, gateway %s", ip, cidrs[i], gws[i])
		}
		jc.IPs = append(jc.IPs, netip.PrefixFrom(ip, cidrs[i].Bits()))
	}
	return jc, true, nil
}

// SetupWithManager syncs on changes to this node or any Subnet.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	key := reconcile.Request{NamespacedName: types.NamespacedName{Name: r.Cfg.NodeName}}
	toKey := handler.EnqueueRequestsFromMapFunc(func(context.Context, client.Object) []reconcile.Request {
		return []reconcile.Request{key}
	})
	return ctrl.NewControllerManagedBy(mgr).Named("node-network").
		Watches(&corev1.Node{}, toKey).Watches(&kovnv1.Subnet{}, toKey).Complete(r)
}
