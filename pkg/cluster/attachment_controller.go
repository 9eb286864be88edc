package cluster

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"

	nadv1 "github.com/kovn/kovn/api/nad/v1"
	kovnv1 "github.com/kovn/kovn/api/v1alpha1"
	"github.com/kovn/kovn/pkg/cluster/topology"
	"github.com/kovn/kovn/pkg/contract"
	"github.com/kovn/kovn/pkg/ipam"
	"github.com/kovn/kovn/pkg/netattach"
)

// Reasons of the events on a pod whose attachment networks kovn does not serve.
const (
	// ReasonInvalidNetworks: the networks annotation does not parse; no attachment is made.
	ReasonInvalidNetworks = "InvalidNetworks"
	// ReasonNetworkRefused: a named definition is missing, in a namespace not shared, malformed
	// or of a plugin type not allowed, or no Subnet provides its addresses.
	ReasonNetworkRefused = "NetworkRefused"
	// ReasonNetworksChanged: the annotation changed after the pod's attachments were allocated;
	// they stay as they are while the pod lives (its interfaces carry them).
	ReasonNetworksChanged = "NetworksChanged"
)

// ipPodKey indexes IP objects by their pod ("namespace/name").
const ipPodKey = "spec.pod"

func ipPodIndex(o client.Object) []string {
	ip := o.(*kovnv1.IP)
	if ip.Spec.PodName == "" {
		return nil
	}
	return []string{podOwner(ip.Spec.Namespace, ip.Spec.PodName)}
}

// attachmentOwner is the IPAM owner of one attachment's addresses.
func attachmentOwner(ns, pod, iface string) string { return podOwner(ns, pod) + "@" + iface }

// AttachmentIPName is the IP object of a pod's attachment interface.
func AttachmentIPName(ns, pod, iface string) string {
	return contract.AttachmentPortName(ns, pod, iface)
}

// AttachmentReconciler allocates the addresses of a pod's attachment networks that take them
// from kovn (type kovn, or a delegate with ipam {type: kovn}) from the Subnet whose provider
// names the definition, and records each as an IP object with its network and interface. A
// requested IP or MAC goes through the IPAM as a primary static address does. Allocations
// are kept while the pod lives (its interfaces carry them) and released when it is gone.
type AttachmentReconciler struct {
	client.Client
	State    *State
	Recorder record.EventRecorder
	// Delegates are the plugin types a definition may name besides kovn's own, and the node
	// interfaces they may name.
	Delegates netattach.DelegatePolicy
}

// +kubebuilder:rbac:groups=k8s.cni.cncf.io,resources=network-attachment-definitions,verbs=get;list;watch

// Reconcile implements reconcile.Reconciler; the request names the pod.
func (r *AttachmentReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	if err := r.State.WaitRestored(ctx); err != nil {
		return ctrl.Result{}, err
	}
	pod, gone, err := networkedPod(ctx, r.Client, req.NamespacedName)
	if gone {
		return ctrl.Result{}, r.releaseAll(ctx, req.Namespace, req.Name)
	}
	if err != nil || pod == nil {
		return ctrl.Result{}, err
	}
	sels, err := netattach.ParseSelections(pod.Annotations[netattach.NetworksAnnotation], pod.Namespace)
	if err != nil {
		r.Recorder.Event(pod, corev1.EventTypeWarning, ReasonInvalidNetworks, err.Error())
		return ctrl.Result{}, nil
	}
	if len(sels) == 0 { // most pods: nothing to look up
		return ctrl.Result{}, nil
	}
	held, err := r.attachmentIPs(ctx, pod.Namespace, pod.Name)
	if err != nil {
		return ctrl.Result{}, err
	}
	// Every new selection is resolved before any is allocated, and a failed allocation takes
	// back this pass's others: a pod gets all its attachments' addresses or none of them.
	var todo []resolved
	for _, sel := range sels {
		if ip, ok := held[sel.Interface]; ok {
			if ip.Spec.Network != sel.Key() {
				r.Recorder.Eventf(pod, corev1.EventTypeWarning, ReasonNetworksChanged,
					"interface %s keeps network %s while the pod lives (the annotation now names %s)", sel.Interface, ip.Spec.Network, sel.Key())
			}
			if err := r.follow(ctx, &ip, pod.Spec.NodeName); err != nil {
				return ctrl.Result{}, err
			}
			continue
		}
		a, sn, err := r.resolve(ctx, pod.Namespace, sel)
		if err != nil {
			r.Recorder.Event(pod, corev1.EventTypeWarning, ReasonNetworkRefused, err.Error())
			return ctrl.Result{RequeueAfter: 10 * time.Second}, nil // the definition or Subnet may appear
		}
		if a.KovnIPAM { // else the delegate's own IPAM: nothing of kovn's to allocate
			todo = append(todo, resolved{sel, a, sn})
		}
	}
	for i, t := range todo {
		retry, err := r.allocate(ctx, pod, t)
		if errors.Is(err, errNotCached) { // recorded already, but not in this cache yet: keep all
			return ctrl.Result{RequeueAfter: time.Second}, nil
		}
		if err != nil || retry {
			for _, done := range todo[:i] {
				r.unallocate(ctx, pod.Namespace, pod.Name, done.sel.Interface)
			}
			if retry { // an address may be freed
				return ctrl.Result{RequeueAfter: 10 * time.Second}, nil
			}
			return ctrl.Result{}, err
		}
	}
	return ctrl.Result{}, nil
}

// follow moves a kept record (a StatefulSet pod recreated) to the node the pod now runs on:
// the node's daemon plumbs only records of its own node.
func (r *AttachmentReconciler) follow(ctx context.Context, ip *kovnv1.IP, node string) error {
	if ip.Spec.NodeName == node {
		return nil
	}
	ip.Spec.NodeName = node
	if ip.Labels == nil {
		ip.Labels = map[string]string{}
	}
	ip.Labels[contract.LabelNode] = node
	return r.Update(ctx, ip)
}

// resolved is a selection with its parsed definition and the Subnet providing its addresses.
type resolved struct {
	sel netattach.Selection
	a   netattach.Attachment
	sn  topology.SubnetIn
}

// allocate takes one attachment's addresses and records them; refused says so in an event and
// asks for a retry.
func (r *AttachmentReconciler) allocate(ctx context.Context, pod *corev1.Pod, t resolved) (retry bool, err error) {
	owner := attachmentOwner(pod.Namespace, pod.Name, t.sel.Interface)
	ips, _ := t.sel.Addrs() // checked by ParseSelections
	alloc, err := r.State.IPAM.Allocate(ipam.Request{Owner: owner, Subnet: t.sn.Name, IPs: ips, MAC: t.sel.MAC})
	if err != nil {
		r.Recorder.Eventf(pod, corev1.EventTypeWarning, allocationFailure(err), "network %s (%s): %v", t.sel.Key(), t.sel.Interface, err)
		return true, nil
	}
	if err := r.record(ctx, pod, t, alloc); err != nil {
		if errors.Is(err, errNotCached) {
			return false, err // the IPAM's allocation is the owner's, as recorded
		}
		r.State.IPAM.Release(owner)
		if errors.Is(err, errForeignIP) {
			r.Recorder.Event(pod, corev1.EventTypeWarning, ReasonNetworkRefused, err.Error())
			return true, nil
		}
		return false, err
	}
	return false, nil
}

// unallocate takes back one attachment allocated in a pass that failed later.
func (r *AttachmentReconciler) unallocate(ctx context.Context, ns, name, iface string) {
	r.State.IPAM.Release(attachmentOwner(ns, name, iface))
	ip := kovnv1.IP{ObjectMeta: metav1.ObjectMeta{Name: AttachmentIPName(ns, name, iface)}}
	if err := r.Delete(ctx, &ip); client.IgnoreNotFound(err) != nil {
		ctrl.LoggerFrom(ctx).Error(err, "deleting an attachment's IP object after a failed allocation", "ip", ip.Name)
	}
}

// resolve finds the selection's definition, checks the pod may use it, parses it and, when it
// takes kovn's addresses, finds the Subnet that provides them.
func (r *AttachmentReconciler) resolve(ctx context.Context, podNS string, sel netattach.Selection) (netattach.Attachment, topology.SubnetIn, error) {
	if sel.Namespace != podNS {
		var ns corev1.Namespace
		_ = r.Get(ctx, types.NamespacedName{Name: sel.Namespace}, &ns) // unreadable: not shared
		if err := netattach.CheckNamespace(sel, podNS, ns.Annotations); err != nil {
			return netattach.Attachment{}, topology.SubnetIn{}, err
		}
	}
	var nad nadv1.NetworkAttachmentDefinition
	if err := r.Get(ctx, types.NamespacedName{Namespace: sel.Namespace, Name: sel.Name}, &nad); err != nil {
		return netattach.Attachment{}, topology.SubnetIn{}, fmt.Errorf("network %s: NetworkAttachmentDefinition: %v", sel.Key(), err)
	}
	a, err := netattach.ParseNAD(sel.Key(), nad.Spec.Config, r.Delegates)
	if err != nil || !a.KovnIPAM {
		return a, topology.SubnetIn{}, err
	}
	sn, err := r.State.SubnetForNetwork(a.Key)
	return a, sn, err
}

var (
	// errForeignIP: the attachment's IP object name is held by another pod's record.
	errForeignIP = errors.New("IP object held by another pod")
	// errNotCached: the IP object exists, but the cache the reconcile read has not seen it.
	errNotCached = errors.New("IP object not in the cache yet")
)

func (r *AttachmentReconciler) record(ctx context.Context, pod *corev1.Pod, t resolved, alloc ipam.Allocation) error {
	sel, a, sn := t.sel, t.a, t.sn
	name := AttachmentIPName(pod.Namespace, pod.Name, sel.Interface)
	spec := kovnv1.IPSpec{PodName: pod.Name, Namespace: pod.Namespace, Subnet: sn.Name, NodeName: pod.Spec.NodeName,
		MACAddress: alloc.MAC, Network: a.Key, Interface: sel.Interface, Delegated: a.Kind == netattach.KindDelegate}
	spec.SetAddrs(alloc.IPs)
	var old kovnv1.IP
	err := r.Get(ctx, types.NamespacedName{Name: name}, &old)
	switch {
	case err == nil && (old.Spec.Namespace != pod.Namespace || old.Spec.PodName != pod.Name || old.Spec.Interface != sel.Interface):
		// Names join pod, namespace and interface with dots, which pod names may hold too:
		// never take over another pod's record.
		return fmt.Errorf("%w: network %s (%s): IP object %s belongs to %s/%s (%s)", errForeignIP, a.Key, sel.Interface, name,
			old.Spec.Namespace, old.Spec.PodName, old.Spec.Interface)
	case err == nil:
		old.Spec = spec
		return r.Update(ctx, &old)
	case !apierrors.IsNotFound(err):
		return err
	}
	labels := map[string]string{contract.LabelSubnet: sn.Name, contract.LabelNode: pod.Spec.NodeName}
	if sts, _, ok := statefulSetOf(pod); ok {
		labels[contract.LabelStatefulSet] = sts // kept while the StatefulSet wants the pod back, as eth0's
	}
	ip := kovnv1.IP{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}, Spec: spec}
	if err = r.Create(ctx, &ip); apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("%w: %s", errNotCached, name)
	}
	return err
}

// attachmentIPs returns the pod's attachment IP objects by interface.
func (r *AttachmentReconciler) attachmentIPs(ctx context.Context, ns, name string) (map[string]kovnv1.IP, error) {
	var ips kovnv1.IPList
	if err := r.List(ctx, &ips, client.MatchingFields{ipPodKey: podOwner(ns, name)}); err != nil {
		return nil, err
	}
	out := map[string]kovnv1.IP{}
	for _, ip := range ips.Items {
		if ip.Spec.Interface != "" && ip.Spec.Namespace == ns && ip.Spec.PodName == name {
			out[ip.Spec.Interface] = ip
		}
	}
	return out, nil
}

// attachmentPorts returns the pod's attachment ports: its attachment IP objects of type kovn
// (delegates have no OVN port), recorded for this pod on its node, in the Subnet that still
// provides their network; sorted by interface.
func attachmentPorts(ctx context.Context, c client.Reader, st *State, pod *corev1.Pod) ([]topology.AttachmentIn, error) {
	var ips kovnv1.IPList
	if err := c.List(ctx, &ips, client.MatchingFields{ipPodKey: podOwner(pod.Namespace, pod.Name)}); err != nil {
		return nil, err
	}
	var out []topology.AttachmentIn
	for _, ip := range ips.Items {
		s := ip.Spec
		if s.Interface == "" || s.Delegated || s.Namespace != pod.Namespace || s.PodName != pod.Name || s.NodeName != pod.Spec.NodeName ||
			ip.Name != AttachmentIPName(pod.Namespace, pod.Name, s.Interface) {
			continue
		}
		sn, ok := st.Subnet(s.Subnet)
		addrs, err := s.Addrs()
		if !ok || sn.Provider != s.Network || err != nil {
			continue
		}
		out = append(out, topology.AttachmentIn{Interface: s.Interface, Switch: sn.Switch, IPs: addrs, MAC: s.MACAddress})
	}
	slices.SortFunc(out, func(a, b topology.AttachmentIn) int { return strings.Compare(a.Interface, b.Interface) })
	return out, nil
}

// releaseAll frees every attachment address of a gone pod and deletes its records.
func (r *AttachmentReconciler) releaseAll(ctx context.Context, ns, name string) error {
	held, err := r.attachmentIPs(ctx, ns, name)
	if err != nil {
		return err
	}
	ifaces := make([]string, 0, len(held))
	for iface := range held {
		ifaces = append(ifaces, iface)
	}
	slices.Sort(ifaces)
	for _, iface := range ifaces {
		ip := held[iface]
		if statefulSetWants(ctx, r.Client, &ip) {
			continue // the StatefulSet recreates the pod: it gets the same attachment addresses
		}
		r.State.IPAM.Release(attachmentOwner(ns, name, iface))
		if err := r.Delete(ctx, &ip); client.IgnoreNotFound(err) != nil {
			return err
		}
	}
	return nil
}

// SetupWithManager registers the reconciler (Setup registers the IP objects' pod index).
func (r *AttachmentReconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).For(&corev1.Pod{}).Named("pod-attachments").
		WithOptions(controller.Options{MaxConcurrentReconciles: 4}).Complete(r)
}
