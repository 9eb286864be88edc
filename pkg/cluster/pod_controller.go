package cluster

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"

	kovnv1 "github.com/kovn/kovn/api/v1alpha1"
	"github.com/kovn/kovn/pkg/annotation"
	"github.com/kovn/kovn/pkg/cluster/topology"
	"github.com/kovn/kovn/pkg/contract"
	"github.com/kovn/kovn/pkg/ipam"
)

// ReasonUntrustedAnnotations: a pod carries result annotations (allocated, cidr, gateway,
// port_name) that kovn-controller did not write. They are ignored; the pod is networked only
// from what the controller allocates and records in its IP object.
const ReasonUntrustedAnnotations = "UntrustedAnnotations"

// PodReconciler allocates each scheduled pod's addresses, records them as an IP object (the
// IPAM's durable record) and publishes them in the pod's annotations. Addresses are released
// when the pod is gone, except for StatefulSet pods, which keep theirs while the StatefulSet
// still wants that ordinal.
type PodReconciler struct {
	client.Client
	State    *State
	Recorder record.EventRecorder
}

func podOwner(ns, name string) string { return ns + "/" + name }

// IPObjectName is the name of a pod's IP object.
func IPObjectName(ns, name string) string { return contract.PodPortName(ns, name) }

// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=events,verbs=create;patch
// +kubebuilder:rbac:groups=apps,resources=statefulsets,verbs=get;list;watch
// +kubebuilder:rbac:groups=kovn.io,resources=ips,verbs=get;list;watch;create;update;delete
// +kubebuilder:rbac:groups=kovn.io,resources=ippools,verbs=get;list;watch

// Reconcile implements reconcile.Reconciler.
func (r *PodReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	if err := r.State.WaitRestored(ctx); err != nil {
		return ctrl.Result{}, err
	}
	pod, gone, err := networkedPod(ctx, r.Client, req.NamespacedName)
	if gone {
		return ctrl.Result{}, r.release(ctx, req.Namespace, req.Name)
	}
	if err != nil || pod == nil {
		return ctrl.Result{}, err
	}
	areq, sn, err := r.request(ctx, pod)
	if err == nil && areq.fresh && claimsResults(pod.Annotations) {
		r.Recorder.Event(pod, corev1.EventTypeWarning, ReasonUntrustedAnnotations,
			"the pod carries network result annotations kovn did not write; they are ignored (only ip_address, mac_address, ip_pool and logical_switch are requests)")
	}
	if err != nil {
		reason := "InvalidNetworkRequest"
		if errors.Is(err, errOutOfScope) {
			reason = ReasonNetworkRequestDenied
		}
		r.Recorder.Event(pod, corev1.EventTypeWarning, reason, err.Error())
		return ctrl.Result{}, nil // the pod stays without a network until its annotations are fixed
	}
	alloc, err := r.State.IPAM.Allocate(areq.Request)
	if errors.Is(err, ipam.ErrOwnerMismatch) { // e.g. a recreated StatefulSet pod asking for another subnet
		r.State.IPAM.Release(areq.Owner)
		alloc, err = r.State.IPAM.Allocate(areq.Request)
	}
	if err != nil {
		r.Recorder.Event(pod, corev1.EventTypeWarning, allocationFailure(err), err.Error())
		return ctrl.Result{RequeueAfter: 15 * time.Second}, nil
	}
	if err := r.recordIP(ctx, pod, sn, alloc); err != nil {
		if errors.Is(err, errForeignIP) { // a name collision: the other owner's record stays
			r.State.IPAM.Release(areq.Owner)
			r.Recorder.Event(pod, corev1.EventTypeWarning, ReasonNetworkRefused, err.Error())
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, err
	}
	return ctrl.Result{}, patchAnnotations(ctx, r.Client, pod, podAnnotations(pod, sn, alloc))
}

// networkedPod reads the pod a request names. gone: it no longer exists or has finished, so
// its addresses go. A nil pod without error needs no network (yet): host network, not
// scheduled, or being deleted.
func networkedPod(ctx context.Context, c client.Reader, key types.NamespacedName) (pod *corev1.Pod, gone bool, err error) {
	var p corev1.Pod
	err = c.Get(ctx, key, &p)
	switch {
	case apierrors.IsNotFound(err) || (err == nil && podFinished(&p)):
		return nil, true, nil
	case err != nil:
		return nil, false, err
	case p.Spec.HostNetwork || p.Spec.NodeName == "" || p.DeletionTimestamp != nil:
		return nil, false, nil
	}
	return &p, false, nil
}

// allocationFailure is the event reason of an IPAM error: IPConflict for an address another
// owner holds, AllocationFailed otherwise (a full subnet, an address outside it).
func allocationFailure(err error) string {
	if errors.Is(err, ipam.ErrConflict) {
		return "IPConflict"
	}
	return "AllocationFailed"
}

func podFinished(p *corev1.Pod) bool {
	return p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed
}

func podAnnotations(pod *corev1.Pod, sn topology.SubnetIn, alloc ipam.Allocation) map[string]string {
	cidrs, gws := addressing(sn, alloc.IPs)
	return map[string]string{
		annotation.IPAddress: annotation.JoinAddrs(alloc.IPs), annotation.MACAddress: alloc.MAC,
		annotation.CIDR: cidrs, annotation.Gateway: gws,
		annotation.LogicalSwitch: sn.Name, annotation.PortName: contract.PodPortName(pod.Namespace, pod.Name),
		annotation.Allocated: "true",
	}
}

// podRequest is an IPAM request and whether it is the pod's first (no IP object records an
// allocation for it yet).
type podRequest struct {
	ipam.Request
	fresh bool
}

// request builds the pod's IPAM request. A pod with an IP object keeps what it records: the
// controller's own record, not the pod's annotations, makes results sticky. Otherwise the
// request annotations (static IP/MAC, pool, subnet) and the namespace decide.
func (r *PodReconciler) request(ctx context.Context, pod *corev1.Pod) (podRequest, topology.SubnetIn, error) {
	req := podRequest{Request: ipam.Request{Owner: podOwner(pod.Namespace, pod.Name)}}
	var ip kovnv1.IP
	err := r.Get(ctx, types.NamespacedName{Name: IPObjectName(pod.Namespace, pod.Name)}, &ip)
	if err != nil && !apierrors.IsNotFound(err) {
		return req, topology.SubnetIn{}, err
	}
	var name string
	if err == nil && ownsIP(&ip, pod.Namespace, pod.Name) {
		name, req.MAC = ip.Spec.Subnet, ip.Spec.MACAddress
		req.IPs, _ = ip.Spec.Addrs()
	} else {
		req.fresh = true
		if err := requestedAddrs(pod.Annotations, &req.Request); err != nil {
			return req, topology.SubnetIn{}, err
		}
		if name, err = r.subnetFor(ctx, pod); err != nil {
			return req, topology.SubnetIn{}, err
		}
	}
	sn, ok := r.State.Subnet(name)
	if !ok {
		return req, sn, fmt.Errorf("subnet %q does not exist or is not valid", name)
	}
	if sn.Provider != "" {
		return req, sn, fmt.Errorf("subnet %q is the attachment network of %s: a pod reaches it as an extra interface (annotation k8s.v1.cni.cncf.io/networks), not as eth0", name, sn.Provider)
	}
	req.Subnet, req.Pool = sn.Name, pod.Annotations[annotation.IPPool]
	return req, sn, nil
}

// requestedAddrs reads the static IP and MAC a pod asks for.
func requestedAddrs(ann map[string]string, req *ipam.Request) error {
	if v := ann[annotation.IPAddress]; v != "" {
		ips, err := annotation.ParseAddrs(v)
		if err != nil {
			return fmt.Errorf("annotation %s: %w", annotation.IPAddress, err)
		}
		req.IPs = ips
	}
	if v := ann[annotation.MACAddress]; v != "" {
		mac, err := requestedMAC(v)
		if err != nil {
			return fmt.Errorf("annotation %s: %w", annotation.MACAddress, err)
		}
		req.MAC = mac
	}
	return nil
}

// claimsResults reports whether annotations carry results only kovn-controller writes.
func claimsResults(ann map[string]string) bool {
	for _, k := range []string{annotation.Allocated, annotation.CIDR, annotation.Gateway, annotation.PortName} {
		if _, ok := ann[k]; ok {
			return true
		}
	}
	return false
}

// subnetFor picks the pod's subnet: its logical_switch or ip_pool annotation (a tenant's
// request, checked against what its namespace may use), else its namespace's subnet, else
// the default subnet.
func (r *PodReconciler) subnetFor(ctx context.Context, pod *corev1.Pod) (string, error) {
	if pool := pod.Annotations[annotation.IPPool]; pool != "" {
		var p kovnv1.IPPool
		if err := r.Get(ctx, types.NamespacedName{Name: pool}, &p); err != nil {
			return "", fmt.Errorf("annotation %s: IPPool %q: %w", annotation.IPPool, pool, err)
		}
		if err := poolScope(pod.Namespace, &p); err != nil {
			return "", fmt.Errorf("annotation %s: %w", annotation.IPPool, err)
		}
		if err := checkSubnetScope(ctx, r.Client, pod.Namespace, p.Spec.Subnet, r.State.Opts); err != nil {
			return "", fmt.Errorf("annotation %s: pool %s: %w", annotation.IPPool, pool, err)
		}
		return p.Spec.Subnet, nil
	}
	if s := pod.Annotations[annotation.LogicalSwitch]; s != "" {
		if err := checkSubnetScope(ctx, r.Client, pod.Namespace, s, r.State.Opts); err != nil {
			return "", fmt.Errorf("annotation %s: %w", annotation.LogicalSwitch, err)
		}
		return s, nil
	}
	var ns corev1.Namespace
	if err := r.Get(ctx, types.NamespacedName{Name: pod.Namespace}, &ns); err == nil && ns.Annotations[annotation.LogicalSwitch] != "" {
		return ns.Annotations[annotation.LogicalSwitch], nil
	}
	var subnets kovnv1.SubnetList
	if err := r.List(ctx, &subnets); err != nil {
		return "", err
	}
	def := r.State.Opts.DefaultSubnet
	for _, s := range subnets.Items {
		if _, valid := r.State.Subnet(s.Name); !valid {
			continue // a subnet refused for a namespace or default conflict binds nothing
		}
		if slices.Contains(s.Spec.Namespaces, pod.Namespace) {
			return s.Name, nil
		}
		if s.Spec.Default {
			def = s.Name
		}
	}
	return def, nil
}

// statefulSetOf returns the owning StatefulSet's name and the pod's ordinal.
func statefulSetOf(meta metav1.Object) (string, int, bool) {
	for _, o := range meta.GetOwnerReferences() {
		if o.Kind == "StatefulSet" && o.Controller != nil && *o.Controller {
			ord, ok := ordinalOf(meta.GetName())
			return o.Name, ord, ok
		}
	}
	return "", 0, false
}

func (r *PodReconciler) recordIP(ctx context.Context, pod *corev1.Pod, sn topology.SubnetIn, alloc ipam.Allocation) error {
	ip := kovnv1.IP{ObjectMeta: metav1.ObjectMeta{Name: IPObjectName(pod.Namespace, pod.Name)}}
	labels := map[string]string{contract.LabelSubnet: sn.Name, contract.LabelNode: pod.Spec.NodeName}
	if sts, _, ok := statefulSetOf(pod); ok {
		labels[contract.LabelStatefulSet] = sts
	}
	spec := kovnv1.IPSpec{PodName: pod.Name, Namespace: pod.Namespace, Subnet: sn.Name, NodeName: pod.Spec.NodeName, MACAddress: alloc.MAC}
	spec.SetAddrs(alloc.IPs)
	_, err := ctrl.CreateOrUpdate(ctx, r.Client, &ip, func() error {
		if ip.ResourceVersion != "" && !ownsIP(&ip, pod.Namespace, pod.Name) {
			// Names join pod and namespace (and an attachment's interface) with dots, which pod
			// names may hold too: pod "p.b" of "net1" and pod "p" of "b"'s net1 both name
			// "p.b.net1". Never take over another owner's record.
			return fmt.Errorf("%w: IP object %s belongs to %s/%s (%s)", errForeignIP, ip.Name, ip.Spec.Namespace, ip.Spec.PodName, ip.Spec.Interface)
		}
		ip.Spec = spec
		if ip.Labels == nil {
			ip.Labels = map[string]string{}
		}
		for k, v := range labels {
			ip.Labels[k] = v
		}
		return nil
	})
	return err
}

// statefulSetWants says whether the StatefulSet an IP object is labelled with will recreate
// its pod (it exists, is not being deleted, and the pod's ordinal is below its replicas).
func statefulSetWants(ctx context.Context, c client.Reader, ip *kovnv1.IP) bool {
	name := ip.Labels[contract.LabelStatefulSet]
	if name == "" {
		return false
	}
	var sts appsv1.StatefulSet
	if err := c.Get(ctx, types.NamespacedName{Namespace: ip.Spec.Namespace, Name: name}, &sts); err != nil {
		return false
	}
	ord, ok := ordinalOf(ip.Spec.PodName)
	return ok && sts.DeletionTimestamp == nil && (sts.Spec.Replicas == nil || int32(ord) < *sts.Spec.Replicas)
}

// ownsIP says whether an IP object is pod ns/name's own eth0 record.
func ownsIP(ip *kovnv1.IP, ns, name string) bool {
	return ip.Spec.Namespace == ns && ip.Spec.PodName == name && ip.Spec.Interface == ""
}

// ipOwner is the IPAM owner of an IP object: the pod's own address, or one attachment's.
func ipOwner(ip *kovnv1.IP) string {
	if ip.Spec.Interface != "" {
		return attachmentOwner(ip.Spec.Namespace, ip.Spec.PodName, ip.Spec.Interface)
	}
	return podOwner(ip.Spec.Namespace, ip.Spec.PodName)
}

// release frees a gone pod's addresses unless a StatefulSet still wants that pod back.
func (r *PodReconciler) release(ctx context.Context, ns, name string) error {
	var ip kovnv1.IP
	err := r.Get(ctx, types.NamespacedName{Name: IPObjectName(ns, name)}, &ip)
	if err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	if err == nil && statefulSetWants(ctx, r.Client, &ip) {
		return nil // the StatefulSet will recreate this pod: keep its address
	}
	r.State.IPAM.Release(podOwner(ns, name))
	if err == nil && ownsIP(&ip, ns, name) { // a same-named record of another owner stays
		return client.IgnoreNotFound(r.Delete(ctx, &ip, client.Preconditions{UID: &ip.UID}))
	}
	return nil
}

// CollectOrphans releases the addresses of pods deleted while no controller was running: their
// IP objects were restored into the IPAM, but no event for the pod will ever come. Two lists,
// not one read per IP object: a restart with ten thousand pods must not cost ten thousand calls.
func (r *PodReconciler) CollectOrphans(ctx context.Context) error {
	var ips kovnv1.IPList
	if err := r.List(ctx, &ips); err != nil {
		return err
	}
	var pods corev1.PodList
	if err := r.List(ctx, &pods); err != nil {
		return err
	}
	alive := make(map[string]bool, len(pods.Items))
	for i := range pods.Items {
		alive[podOwner(pods.Items[i].Namespace, pods.Items[i].Name)] = true
	}
	for _, ip := range ips.Items {
		if ip.Spec.PodName == "" || alive[podOwner(ip.Spec.Namespace, ip.Spec.PodName)] {
			continue
		}
		if ip.Spec.Interface != "" { // an attachment's: the pod's own address goes with its own object
			if statefulSetWants(ctx, r.Client, &ip) {
				continue
			}
			r.State.IPAM.Release(ipOwner(&ip))
			if err := r.Delete(ctx, &ip); client.IgnoreNotFound(err) != nil {
				return err
			}
			continue
		}
		if err := r.release(ctx, ip.Spec.Namespace, ip.Spec.PodName); err != nil {
			return err
		}
	}
	return nil
}

// SetupWithManager registers the reconciler.
func (r *PodReconciler) SetupWithManager(mgr ctrl.Manager) error {
	// Several workers: allocation is in memory, but each pod costs two API writes (its IP
	// object, its annotations) whose round trips would otherwise queue up behind each other.
	return ctrl.NewControllerManagedBy(mgr).For(&corev1.Pod{}).Named("pod").
		WithOptions(controller.Options{MaxConcurrentReconciles: 8}).Complete(r)
}
