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
// its ovn0 port, its pods' port group and its reroute policies. Each node also gets a
// masquerade address (see contract.NodeMasqIPName), recorded in its own IP object only.
type NodeReconciler struct {
	client.Client
	State *State
	NB    libovsdb.Client
}

func nodeOwner(name string) string     { return "node/" + name }
func nodeMasqOwner(name string) string { return "node-masq/" + name }

// nodeRecord is one of a node's addresses on the join subnet: its IP object and IPAM owner.
type nodeRecord struct {
	object, owner string
	// masq: the masquerade address (spec.masquerade of its IP object), which rides on ovn0's
	// port with ovn0's MAC and takes none of its own; the join address (not masq) may date from
	// before IP objects recorded nodes, when only the node's annotation had it.
	masq bool
}

func joinRecord(node string) nodeRecord {
	return nodeRecord{object: NodeIPObjectName(node), owner: nodeOwner(node)}
}

// holds: ip is this record of node.
func (rec nodeRecord) holds(ip *kovnv1.IP, node string) bool {
	return ip.Spec.PodName == "" && ip.Spec.NodeName == node && ip.Spec.Interface == "" && ip.Spec.Masquerade == rec.masq
}

func masqRecord(node string) nodeRecord {
	return nodeRecord{object: contract.NodeMasqIPName(node), owner: nodeMasqOwner(node), masq: true}
}

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
		for _, rec := range []nodeRecord{joinRecord(req.Name), masqRecord(req.Name)} {
			r.State.IPAM.Release(rec.owner)
			ip := kovnv1.IP{ObjectMeta: metav1.ObjectMeta{Name: rec.object}}
			if err := r.Delete(ctx, &ip); client.IgnoreNotFound(err) != nil {
				return ctrl.Result{}, err
			}
		}
		return applyShard(ctx, r.NB, emptyShard(topology.OwnerNode, req.Name))
	}
	join, ok := r.State.Subnet(r.State.Opts.JoinSubnet)
	if !ok {
		return ctrl.Result{RequeueAfter: time.Second}, nil // join subnet not registered yet
	}
	alloc, err := r.allocate(ctx, &node, join.Name, joinRecord(node.Name))
	if err != nil {
		return ctrl.Result{}, err
	}
	masq, err := r.allocate(ctx, &node, join.Name, masqRecord(node.Name))
	if err != nil {
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
	in.MasqIPs = masq.IPs
	return applyShard(ctx, r.NB, topology.ForNode(in, &join))
}

// allocate gives the node the address rec stands for, the one it already has if it can, and
// records it in rec's IP object.
func (r *NodeReconciler) allocate(ctx context.Context, node *corev1.Node, join string, rec nodeRecord) (ipam.Allocation, error) {
	want, err := r.request(ctx, node, join, rec)
	if err != nil {
		return ipam.Allocation{}, err
	}
	alloc, err := r.State.IPAM.Allocate(want)
	if err != nil && (len(want.IPs) > 0 || want.MAC != "") {
		alloc, err = r.State.IPAM.Allocate(ipam.Request{Owner: rec.owner, Subnet: join, NoMAC: rec.masq})
	}
	if err != nil {
		return ipam.Allocation{}, err
	}
	return alloc, r.recordIP(ctx, node.Name, join, rec, alloc)
}

// NodeIPObjectName is the IP object recording a node's join address (its ovn0 port's name).
func NodeIPObjectName(node string) string { return contract.NodePortName(node) }

// request asks for the address the node already has: the one rec's IP object records (the
// controller's own record), else, for a join address given before IP objects recorded nodes,
// the one in its annotations (its ovn0 is configured with it).
func (r *NodeReconciler) request(ctx context.Context, node *corev1.Node, join string, rec nodeRecord) (ipam.Request, error) {
	want := ipam.Request{Owner: rec.owner, Subnet: join, NoMAC: rec.masq}
	var ip kovnv1.IP
	err := r.Get(ctx, types.NamespacedName{Name: rec.object}, &ip)
	switch {
	case err == nil && rec.holds(&ip, node.Name):
		want.IPs, _ = ip.Spec.Addrs()
		if !rec.masq {
			want.MAC = ip.Spec.MACAddress
		}
	case err == nil:
		return want, fmt.Errorf("IP object %s is not node %s's (pod %s/%s, node %q)", ip.Name, node.Name, ip.Spec.Namespace, ip.Spec.PodName, ip.Spec.NodeName)
	case apierrors.IsNotFound(err) && !rec.masq:
		if ips, err := annotation.ParseAddrs(node.Annotations[annotation.JoinIP]); err == nil {
			want.IPs = ips
		}
		want.MAC = node.Annotations[annotation.JoinMAC]
	case apierrors.IsNotFound(err):
	default:
		return want, err
	}
	return want, nil
}

// recordIP writes the node's address into rec's IP object, the durable record the IPAM is
// restored from.
func (r *NodeReconciler) recordIP(ctx context.Context, node, join string, rec nodeRecord, alloc ipam.Allocation) error {
	ip := kovnv1.IP{ObjectMeta: metav1.ObjectMeta{Name: rec.object}}
	spec := kovnv1.IPSpec{Subnet: join, NodeName: node, MACAddress: alloc.MAC, Masquerade: rec.masq}
	spec.SetAddrs(alloc.IPs)
	_, err := ctrl.CreateOrUpdate(ctx, r.Client, &ip, func() error {
		if ip.ResourceVersion != "" && !rec.holds(&ip, node) {
			return fmt.Errorf("IP object %s is not node %s's (pod %s/%s, node %q)", ip.Name, node, ip.Spec.Namespace, ip.Spec.PodName, ip.Spec.NodeName)
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
