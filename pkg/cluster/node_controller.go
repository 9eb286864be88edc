package cluster

import (
	"context"
	"fmt"
	"net/netip"
	"time"

	libovsdb "github.com/ovn-org/libovsdb/client"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kovnv1 "github.com/kovn/kovn/api/v1alpha1"
	"github.com/kovn/kovn/pkg/annotation"
	"github.com/kovn/kovn/pkg/cluster/topology"
	"github.com/kovn/kovn/pkg/contract"
	"github.com/kovn/kovn/pkg/ipam"
	"github.com/kovn/kovn/pkg/nodecond"
)

// NodeReconciler gives every node an address on the join subnet for its ovn0 port, publishes
// it in the node's annotations, where kovn-daemon picks it up, and programs the node's shard:
// its ovn0 port, its pods' port group and its reroute policies.
type NodeReconciler struct {
	client.Client
	State *State
	NB    libovsdb.Client
}

func nodeOwner(name string) string { return "node/" + name }

// +kubebuilder:rbac:groups="",resources=nodes,verbs=get;list;watch;patch

// Reconcile implements reconcile.Reconciler.
func (r *NodeReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	if err := r.State.WaitRestored(ctx); err != nil {
		return ctrl.Result{}, err
	}
	var node corev1.Node
	if err := r.Get(ctx, req.NamespacedName, &node); err != nil {
		if client.IgnoreNotFound(err) != nil {
			return ctrl.Result{}, err
		}
		r.State.IPAM.Release(nodeOwner(req.Name))
		ip := kovnv1.IP{ObjectMeta: metav1.ObjectMeta{Name: NodeIPObjectName(req.Name)}}
		if err := r.Delete(ctx, &ip); client.IgnoreNotFound(err) != nil {
			return ctrl.Result{}, err
		}
		return applyShard(ctx, r.NB, emptyShard(topology.OwnerNode, req.Name))
	}
	join, ok := r.State.Subnet(r.State.Opts.JoinSubnet)
	if !ok {
		return ctrl.Result{RequeueAfter: time.Second}, nil // join subnet not registered yet
	}
	want, err := r.request(ctx, &node, join.Name)
	if err != nil {
		return ctrl.Result{}, err
	}
	alloc, err := r.State.IPAM.Allocate(want)
	if err != nil && (len(want.IPs) > 0 || want.MAC != "") {
		alloc, err = r.State.IPAM.Allocate(ipam.Request{Owner: nodeOwner(node.Name), Subnet: join.Name})
	}
	if err != nil {
		return ctrl.Result{}, err
	}
	if err := r.recordIP(ctx, node.Name, join.Name, alloc); err != nil {
		return ctrl.Result{}, err
	}
	cidrs, gws := addressing(join, alloc.IPs)
	ann := map[string]string{
		annotation.JoinIP: annotation.JoinAddrs(alloc.IPs), annotation.JoinMAC: alloc.MAC,
		annotation.JoinCIDR: cidrs, annotation.JoinGateway: gws,
	}
	if err := patchAnnotations(ctx, r.Client, &node, ann); err != nil {
		return ctrl.Result{}, err
	}
	in := nodeIn(&node)
	in.JoinIPs, in.JoinMAC = alloc.IPs, alloc.MAC // the IPAM's record, not what the annotation says
	return applyShard(ctx, r.NB, topology.ForNode(in, &join))
}

// NodeIPObjectName is the IP object recording a node's join address (its ovn0 port's name).
func NodeIPObjectName(node string) string { return contract.NodePortName(node) }

// request asks for the join address the node already has: the one its IP object records (the
// controller's own record), else, for nodes addressed before IP objects recorded nodes, the
// one in its annotations (its ovn0 is configured with it).
func (r *NodeReconciler) request(ctx context.Context, node *corev1.Node, join string) (ipam.Request, error) {
	want := ipam.Request{Owner: nodeOwner(node.Name), Subnet: join}
	var ip kovnv1.IP
	err := r.Get(ctx, types.NamespacedName{Name: NodeIPObjectName(node.Name)}, &ip)
	switch {
	case err == nil && ip.Spec.PodName == "" && ip.Spec.NodeName == node.Name:
		want.IPs, _ = ip.Spec.Addrs()
		want.MAC = ip.Spec.MACAddress
	case err == nil:
		return want, fmt.Errorf("IP object %s belongs to pod %s/%s, not to node %s", ip.Name, ip.Spec.Namespace, ip.Spec.PodName, node.Name)
	case apierrors.IsNotFound(err):
		if ips, err := annotation.ParseAddrs(node.Annotations[annotation.JoinIP]); err == nil {
			want.IPs = ips
		}
		want.MAC = node.Annotations[annotation.JoinMAC]
	default:
		return want, err
	}
	return want, nil
}

// recordIP writes the node's join address into its IP object, the durable record the IPAM is
// restored from.
func (r *NodeReconciler) recordIP(ctx context.Context, node, join string, alloc ipam.Allocation) error {
	ip := kovnv1.IP{ObjectMeta: metav1.ObjectMeta{Name: NodeIPObjectName(node)}}
	spec := kovnv1.IPSpec{Subnet: join, NodeName: node, MACAddress: alloc.MAC}
	spec.SetAddrs(alloc.IPs)
	_, err := ctrl.CreateOrUpdate(ctx, r.Client, &ip, func() error {
		if ip.Spec.PodName != "" {
			return fmt.Errorf("IP object %s belongs to pod %s/%s", ip.Name, ip.Spec.Namespace, ip.Spec.PodName)
		}
		ip.Spec = spec
		if ip.Labels == nil {
			ip.Labels = map[string]string{}
		}
		ip.Labels[contract.LabelSubnet], ip.Labels[contract.LabelNode] = join, node
		return nil
	})
	return err
}

// nodeIn is the topology's view of a node: readiness and InternalIP addresses.
func nodeIn(n *corev1.Node) topology.NodeIn {
	out := topology.NodeIn{Name: n.Name}
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
			out.Ready = true
		}
	}
	for _, a := range n.Status.Addresses {
		if a.Type == corev1.NodeInternalIP {
			if ip, err := netip.ParseAddr(a.Address); err == nil {
				out.NodeIPs = append(out.NodeIPs, ip)
			}
		}
	}
	return out
}

// SetupWithManager registers the reconciler.
func (r *NodeReconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).For(&corev1.Node{}, builder.WithPredicates(nodecond.IgnoreHeartbeats)).Named("node").Complete(r)
}

// patchAnnotations merge-patches obj's annotations when any of want differs.
func patchAnnotations(ctx context.Context, c client.Client, obj client.Object, want map[string]string) error {
	cur := obj.GetAnnotations()
	changed := false
	for k, v := range want {
		if cur[k] != v {
			changed = true
		}
	}
	if !changed {
		return nil
	}
	before := obj.DeepCopyObject().(client.Object)
	if cur == nil {
		cur = map[string]string{}
	}
	for k, v := range want {
		cur[k] = v
	}
	obj.SetAnnotations(cur)
	return c.Patch(ctx, obj, client.MergeFrom(before))
}
