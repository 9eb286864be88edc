package cluster

import (
	"context"
	"fmt"
	"sync"

	libovsdb "github.com/ovn-org/libovsdb/client"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	kovnv1 "github.com/kovn/kovn/api/v1alpha1"
	"github.com/kovn/kovn/pkg/cluster/nbsync"
	"github.com/kovn/kovn/pkg/cluster/topology"
	"github.com/kovn/kovn/pkg/contract"
)

// PodPortReconciler programs each pod's logical switch port. The addresses come from the pod's
// IP object, which only kovn-controller may write (RBAC), never from the pod's annotations,
// which anyone who may create a pod can set: a pod claiming someone else's address gets no
// port. One request is one pod, so the cost of an event does not depend on the cluster's size.
//
// A pod's bandwidth limits (kubernetes.io/{ingress,egress}-bandwidth, bounded by its Subnet's
// podBandwidth) are QoS meters of the same shard; a refused annotation is an event on the pod
// and leaves the programmed limit as it is.
type PodPortReconciler struct {
	client.Client
	State    *State
	NB       libovsdb.Client
	Recorder record.EventRecorder
}

// Reconcile implements reconcile.Reconciler; the request names the pod.
func (r *PodPortReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	if err := r.State.WaitRestored(ctx); err != nil {
		return ctrl.Result{}, err
	}
	in, ok, err := r.desired(ctx, req.NamespacedName)
	if err != nil {
		return ctrl.Result{}, err
	}
	if !ok {
		return applyShard(ctx, r.NB, emptyShard(topology.OwnerPod, req.Namespace+"/"+req.Name))
	}
	return applyShard(ctx, r.NB, topology.ForPod(in))
}

// desired returns the pod's port input, or false when the pod should have no port: it is
// gone, finished or host-networked, or kovn has not recorded its addresses for this node.
func (r *PodPortReconciler) desired(ctx context.Context, key types.NamespacedName) (topology.PodIn, bool, error) {
	var pod corev1.Pod
	if err := r.Get(ctx, key, &pod); err != nil {
		return topology.PodIn{}, false, client.IgnoreNotFound(err)
	}
	if pod.Spec.HostNetwork || podFinished(&pod) || pod.Spec.NodeName == "" {
		return topology.PodIn{}, false, nil
	}
	var ip kovnv1.IP
	err := r.Get(ctx, types.NamespacedName{Name: IPObjectName(key.Namespace, key.Name)}, &ip)
	if apierrors.IsNotFound(err) {
		return topology.PodIn{}, false, nil
	}
	if err != nil {
		return topology.PodIn{}, false, err
	}
	in, err := podInFromIP(&ip, &pod, r.State)
	if err != nil {
		return topology.PodIn{}, false, nil // not (yet) this pod's allocation: no port
	}
	sn, _ := r.State.Subnet(ip.Spec.Subnet) // podInFromIP found it
	if in.Attachments, err = attachmentPorts(ctx, r.Client, r.State, &pod); err != nil {
		return topology.PodIn{}, false, err
	}
	// What is programmed now matters only when an annotation is refused: read NB then only.
	var readErr error
	current := sync.OnceValue(func() topology.Bandwidth {
		b, err := nbsync.ProgrammedBandwidth(ctx, r.NB, pod.Namespace, pod.Name)
		readErr = err
		return b
	})
	var problems []string
	in.Bandwidth, problems = podBandwidth(pod.Annotations, sn.PodBandwidth, current)
	if readErr != nil {
		return topology.PodIn{}, false, readErr
	}
	for _, p := range problems {
		r.Recorder.Event(&pod, corev1.EventTypeWarning, kovnv1.ReasonInvalidBandwidth, p)
	}
	return in, true, nil
}

// podInFromIP turns a pod's IP object into the topology input, checking that the record is
// this pod's, for the node it runs on, in a subnet that is programmed.
func podInFromIP(ip *kovnv1.IP, pod *corev1.Pod, st *State) (topology.PodIn, error) {
	if !ownsIP(ip, pod.Namespace, pod.Name) {
		return topology.PodIn{}, fmt.Errorf("IP %s belongs to %s/%s (%s)", ip.Name, ip.Spec.Namespace, ip.Spec.PodName, ip.Spec.Interface)
	}
	if ip.Spec.NodeName != pod.Spec.NodeName {
		return topology.PodIn{}, fmt.Errorf("IP %s is recorded for node %q, the pod runs on %q", ip.Name, ip.Spec.NodeName, pod.Spec.NodeName)
	}
	sn, ok := st.Subnet(ip.Spec.Subnet)
	if !ok {
		return topology.PodIn{}, fmt.Errorf("subnet %q of IP %s is not valid", ip.Spec.Subnet, ip.Name)
	}
	ips, err := ip.Spec.Addrs()
	if err != nil {
		return topology.PodIn{}, fmt.Errorf("IP %s: %w", ip.Name, err)
	}
	return topology.PodIn{Namespace: pod.Namespace, Name: pod.Name, Node: pod.Spec.NodeName, Switch: sn.Switch,
		IPs: ips, MAC: ip.Spec.MACAddress}, nil
}

// SetupWithManager registers the reconciler: pod and IP object events both map to the pod.
func (r *PodPortReconciler) SetupWithManager(mgr ctrl.Manager) error {
	ipToPod := handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
		ip, ok := o.(*kovnv1.IP)
		if !ok || ip.Spec.PodName == "" {
			return nil
		}
		return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: ip.Spec.Namespace, Name: ip.Spec.PodName}}}
	})
	// A subnet's pod bandwidth default changed: every pod with an address in it.
	subnetPods := handler.TypedFuncs[string, reconcile.Request]{
		GenericFunc: func(ctx context.Context, e event.TypedGenericEvent[string], q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			var ips kovnv1.IPList
			if err := r.List(ctx, &ips, client.MatchingLabels{contract.LabelSubnet: e.Object}); err != nil {
				ctrl.Log.Error(err, "listing the IPs of a subnet whose pod bandwidth changed", "subnet", e.Object)
				return
			}
			for _, ip := range ips.Items {
				if ip.Spec.PodName != "" {
					q.Add(reconcile.Request{NamespacedName: types.NamespacedName{Namespace: ip.Spec.Namespace, Name: ip.Spec.PodName}})
				}
			}
		}}
	return ctrl.NewControllerManagedBy(mgr).For(&corev1.Pod{}).Watches(&kovnv1.IP{}, ipToPod).
		WatchesRawSource(source.Channel(r.State.podBandwidth, subnetPods)).
		WithOptions(controller.Options{MaxConcurrentReconciles: 4}).Named("pod-port").Complete(r)
}
