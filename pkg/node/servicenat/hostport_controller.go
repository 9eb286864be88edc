package servicenat

import (
	"context"
	"net/netip"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	kovnv1 "github.com/kovn/kovn/api/v1alpha1"
	"github.com/kovn/kovn/pkg/contract"
	"github.com/kovn/kovn/pkg/node/bootstrap"
)

// HostPortReconciler keeps the node's hostPort translation (hostports.go) equal to the
// hostPorts of the pods on this node. Every event means "recompute everything" from the
// daemon's cache (this node's pods and IP objects, every Subnet); the rules are rewritten
// only when their text changes. The first pass after a start rewrites them unconditionally,
// which drops whatever an earlier run left for pods deleted in between.
//
// The CNI config does not declare the portMappings capability: the runtime's per-sandbox
// portMappings would only repeat the pod spec, and state learned from CNI ADD is lost with a
// daemon restart or a missed DEL, while the Pod objects are always there to rebuild from.
type HostPortReconciler struct {
	client.Client
	NodeName   string
	JoinSubnet string // its VPC's subnets are the ones the node routes to (desiredCIDRs)
	// Apply writes one family's rules; nil: iptables / ip6tables.
	Apply func(is4 bool, rules string) error

	chains familyChains
}

// Read-only, as the node's other reconcilers; the markers repeat theirs so this one's needs
// stay visible here (controller-gen merges them into the same rules).
// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch
// +kubebuilder:rbac:groups=kovn.io,resources=ips;subnets,verbs=get;list;watch

// Reconcile implements reconcile.Reconciler.
func (r *HostPortReconciler) Reconcile(ctx context.Context, _ ctrl.Request) (ctrl.Result, error) {
	maps, err := r.mappings(ctx)
	if err != nil {
		return ctrl.Result{}, err
	}
	apply := r.Apply
	if apply == nil {
		apply = ApplyHostPortRules
	}
	masq, err := nodeMasqAddrs(ctx, r.Client, r.NodeName)
	if err != nil {
		return ctrl.Result{}, err
	}
	return ctrl.Result{}, r.chains.sync(func(is4 bool) string { return HostPortRules(is4, maps, masq) }, apply)
}

// nodeMasqAddrs reads the node's masquerade addresses from the IP object kovn-controller
// records them in (none yet: the rules fall back to MASQUERADE).
func nodeMasqAddrs(ctx context.Context, c client.Reader, node string) ([]netip.Addr, error) {
	var ip kovnv1.IP
	err := c.Get(ctx, types.NamespacedName{Name: contract.NodeMasqIPName(node)}, &ip)
	if apierrors.IsNotFound(err) {
		return nil, nil // its creation brings another pass
	} else if err != nil {
		return nil, err
	}
	return masqAddrsOf(&ip, node), nil
}

// masqAddrsIn picks the node's masquerade addresses out of IP objects already listed.
func masqAddrsIn(ips []kovnv1.IP, node string) []netip.Addr {
	i := slices.IndexFunc(ips, func(ip kovnv1.IP) bool { return ip.Name == contract.NodeMasqIPName(node) })
	if i < 0 {
		return nil
	}
	return masqAddrsOf(&ips[i], node)
}

// masqAddrsOf are ip's addresses if it is node's masquerade record.
func masqAddrsOf(ip *kovnv1.IP, node string) []netip.Addr {
	if ip.Spec.PodName != "" || ip.Spec.NodeName != node || !ip.Spec.Masquerade {
		return nil
	}
	addrs, _ := ip.Spec.Addrs()
	return addrs
}

// mappings lists the hostPorts of this node's pods with the addresses kovn-controller
// recorded for them.
func (r *HostPortReconciler) mappings(ctx context.Context) ([]HostPortMapping, error) {
	var pods corev1.PodList
	if err := r.List(ctx, &pods); err != nil {
		return nil, err
	}
	var subnets kovnv1.SubnetList
	if err := r.List(ctx, &subnets); err != nil {
		return nil, err
	}
	routed := routedSubnets(subnets.Items, r.JoinSubnet)
	var out []HostPortMapping
	for i := range pods.Items {
		pod := &pods.Items[i]
		if !wantsHostPorts(pod, r.NodeName) {
			continue
		}
		var ip kovnv1.IP
		err := r.Get(ctx, types.NamespacedName{Name: contract.PodPortName(pod.Namespace, pod.Name)}, &ip)
		if apierrors.IsNotFound(err) {
			continue // not allocated yet: the IP object's creation brings another pass
		} else if err != nil {
			return nil, err
		}
		if ip.Spec.Namespace != pod.Namespace || ip.Spec.PodName != pod.Name || ip.Spec.NodeName != r.NodeName || !routed[ip.Spec.Subnet] {
			continue
		}
		addrs, err := ip.Spec.Addrs()
		if err != nil {
			continue
		}
		out = append(out, podHostPorts(pod, addrs)...)
	}
	return out, nil
}

// wantsHostPorts: a running (or starting) pod of this node's pod network with a hostPort.
// hostNetwork pods bind the node's ports themselves; finished pods no longer own their
// address (the controller may hand it to another pod).
func wantsHostPorts(pod *corev1.Pod, node string) bool {
	if pod.Spec.NodeName != node || pod.Spec.HostNetwork ||
		pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
		return false
	}
	for _, c := range pod.Spec.Containers {
		for _, p := range c.Ports {
			if p.HostPort > 0 {
				return true
			}
		}
	}
	return false
}

// routedSubnets names the subnets whose pods the node reaches through ovn0: the validated
// subnets of the join subnet's VPC (as desiredCIDRs). A custom VPC's pods are isolated from
// the node and may reuse the default VPC's addresses: a DNAT to them would reach someone else.
func routedSubnets(subnets []kovnv1.Subnet, joinSubnet string) map[string]bool {
	out := map[string]bool{}
	for _, s := range bootstrap.NodeVPCSubnets(subnets, joinSubnet) {
		if s.Name != joinSubnet {
			out[s.Name] = true
		}
	}
	return out
}

// podHostPorts reads a pod's hostPorts (init containers publish none: kubelet ignores their
// ports). hostIP "" and 0.0.0.0 mean every node address of both families; an unparsable
// hostIP (the API validates it) publishes nothing rather than everywhere.
func podHostPorts(pod *corev1.Pod, addrs []netip.Addr) []HostPortMapping {
	var out []HostPortMapping
	for _, c := range pod.Spec.Containers {
		for _, p := range c.Ports {
			if p.HostPort <= 0 {
				continue
			}
			m := HostPortMapping{Key: pod.Namespace + "/" + pod.Name, Protocol: strings.ToUpper(string(p.Protocol)),
				HostPort: p.HostPort, ContainerPort: p.ContainerPort, PodIPs: addrs}
			if m.Protocol == "" {
				m.Protocol = string(corev1.ProtocolTCP)
			}
			if p.HostIP != "" && p.HostIP != "0.0.0.0" {
				a, err := netip.ParseAddr(p.HostIP)
				if err != nil {
					continue
				}
				m.HostIP = a.Unmap()
			}
			out = append(out, m)
		}
	}
	return out
}

// ApplyHostPortRules makes sure the chains exist and are jumped to, then rewrites them.
// PREROUTING catches traffic entering the node, OUTPUT the node's own (hairpin from the host
// network, including hostNetwork pods).
func ApplyHostPortRules(is4 bool, rules string) error {
	return applyChains(is4, []chainJump{{"nat", "PREROUTING", hostPortChain}, {"nat", "OUTPUT", hostPortChain},
		{"nat", "POSTROUTING", hostPortMasqChain}}, rules)
}

// SetupWithManager: every event of a pod or IP object of this node, or of any Subnet,
// enqueues the one key.
func (r *HostPortReconciler) SetupWithManager(mgr ctrl.Manager) error {
	one := handler.EnqueueRequestsFromMapFunc(func(context.Context, client.Object) []reconcile.Request {
		return []reconcile.Request{{NamespacedName: types.NamespacedName{Name: "hostports"}}}
	})
	return ctrl.NewControllerManagedBy(mgr).Named("hostports").
		Watches(&corev1.Pod{}, one).Watches(&kovnv1.IP{}, one).Watches(&kovnv1.Subnet{}, one).Complete(r)
}
