package mcs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	mcsv1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	kovnv1 "github.com/kovn/kovn/api/v1alpha1"
	"github.com/kovn/kovn/pkg/interconnect/tamper"
	"github.com/kovn/kovn/pkg/ovn"
)

// ExportReconciler writes each ServiceExport's Service and endpoints into the clusterset
// store (this cluster's rows only) and reports on the export whether it is valid, exported,
// and in conflict with another cluster's export of the same Service.
//
// It also guards those rows: the store lets any AZ's certificate write any row, so a pass that
// finds its rows changed while what it wants to publish has not changed since its last write
// puts them back and says so (a Warning event on the ServiceExport, the clusterset Tamper log
// behind the InterConnect's Degraded condition, kovn_ic_records_restored_total).
type ExportReconciler struct {
	client.Client
	Set      *Clusterset
	Recorder record.EventRecorder
	Tamper   *tamper.Log

	mu      sync.Mutex
	written map[types.NamespacedName]lastWrite
}

// lastWrite is what an export's rows were last made to hold, and when.
type lastWrite struct {
	fingerprint string
	at          time.Time
}

// settleTime: a difference found this soon after this cluster's own write may be its own
// write not yet in the client's cache, so it is put right without being called tampering.
const settleTime = 2 * time.Second

// +kubebuilder:rbac:groups=multicluster.x-k8s.io,resources=serviceexports,verbs=get;list;watch
// +kubebuilder:rbac:groups=multicluster.x-k8s.io,resources=serviceexports/status,verbs=get;update;patch
// +kubebuilder:rbac:groups="",resources=services,verbs=get;list;watch
// +kubebuilder:rbac:groups=discovery.k8s.io,resources=endpointslices,verbs=get;list;watch

// Reconcile implements reconcile.Reconciler.
func (r *ExportReconciler) Reconcile(ctx context.Context, req ctrl.Request) (res ctrl.Result, err error) {
	statusCtx := ctx // the status is written even when the pass ran out of time
	ctx, cancel := context.WithTimeout(ctx, ovn.ReconcileTimeout)
	defer cancel()
	store, release := r.Set.Writer()
	defer release()
	var se mcsv1.ServiceExport
	if err := r.Get(ctx, req.NamespacedName, &se); err != nil || !se.DeletionTimestamp.IsZero() {
		if client.IgnoreNotFound(err) != nil {
			return ctrl.Result{}, err
		}
		r.forget(req.NamespacedName)
		return ctrl.Result{}, withdraw(ctx, store, req.Namespace, req.Name)
	}
	before := se.DeepCopy()
	defer func() {
		if perr := r.Status().Patch(statusCtx, &se, client.MergeFrom(before)); perr != nil && err == nil {
			err = perr
		}
	}()
	if store == nil {
		setExportCondition(&se, mcsv1.ServiceExportConditionReady, false, mcsv1.ServiceExportReasonPending,
			"the cluster is not connected to a clusterset store (no InterConnect, or its IC-SB is unreachable)")
		return ctrl.Result{}, nil // the membership reconciler re-queues every export once connected
	}
	var svc corev1.Service
	if err := r.Get(ctx, req.NamespacedName, &svc); err != nil {
		if client.IgnoreNotFound(err) != nil {
			return ctrl.Result{}, err
		}
		r.invalid(&se, mcsv1.ServiceExportReasonNoService, "no Service "+req.Name+" in namespace "+req.Namespace)
		r.forget(req.NamespacedName)
		return ctrl.Result{}, withdraw(ctx, store, req.Namespace, req.Name)
	}
	exp, reason, msg := ExportOf(store.Cluster, &svc, &se)
	if reason != "" {
		r.invalid(&se, reason, msg)
		r.forget(req.NamespacedName)
		return ctrl.Result{}, withdraw(ctx, store, req.Namespace, req.Name)
	}
	validMsg := ""
	locality, lerr := r.locality(ctx, store, &se)
	if exp.Locality = locality; lerr != nil {
		validMsg = lerr.Error()
	}
	setExportCondition(&se, mcsv1.ServiceExportConditionValid, true, mcsv1.ServiceExportReasonValid, validMsg)
	var eps discoveryv1.EndpointSliceList
	if err := r.List(ctx, &eps, client.InNamespace(req.Namespace), client.MatchingLabels{discoveryv1.LabelServiceName: req.Name}); err != nil {
		return ctrl.Result{}, err
	}
	slices := SlicesOf(&svc, eps.Items)
	changed, err := publish(ctx, store, exp, slices)
	if err != nil {
		setExportCondition(&se, mcsv1.ServiceExportConditionReady, false, mcsv1.ServiceExportReasonFailed, err.Error())
		return ctrl.Result{RequeueAfter: 5 * time.Second}, nil
	}
	r.guard(&se, req.NamespacedName, fingerprint(exp, slices), changed)
	exports, err := store.Exports(ctx, req.Namespace, req.Name)
	if errors.Is(err, ErrIncomplete) {
		return ctrl.Result{RequeueAfter: 100 * time.Millisecond}, nil // conflicts judged on a whole view only
	}
	if err != nil {
		return ctrl.Result{}, err
	}
	setConflict(&se, Merge(exports))
	setExportCondition(&se, mcsv1.ServiceExportConditionReady, true, mcsv1.ServiceExportReasonExported,
		"exported to the clusterset as cluster "+store.Cluster)
	return ctrl.Result{}, nil
}

// locality is se's AnnotationLocality; a value that is not one keeps the locality this
// cluster's export has in the store (global if none), and the error, with a Warning event,
// says so: a typo must not move the traffic.
func (r *ExportReconciler) locality(ctx context.Context, store *Store, se *mcsv1.ServiceExport) (string, error) {
	l, err := LocalityOf(se)
	if err == nil {
		return l, nil
	}
	kept := ""
	if exports, lerr := store.Exports(ctx, se.Namespace, se.Name); lerr == nil {
		for _, e := range exports {
			if e.Cluster == store.Cluster {
				kept = e.Locality
			}
		}
	}
	shown := kept
	if shown == "" {
		shown = LocalityGlobal
	}
	err = fmt.Errorf("%w: the export keeps locality %s", err, shown)
	if r.Recorder != nil {
		r.Recorder.Event(se, corev1.EventTypeWarning, "InvalidLocality", err.Error())
	}
	return kept, err
}

func (r *ExportReconciler) invalid(se *mcsv1.ServiceExport, reason mcsv1.ServiceExportConditionReason, msg string) {
	setExportCondition(se, mcsv1.ServiceExportConditionValid, false, reason, msg)
	setExportCondition(se, mcsv1.ServiceExportConditionReady, false, mcsv1.ServiceExportReasonFailed, "not exported: "+msg)
	meta.RemoveStatusCondition(&se.Status.Conditions, string(mcsv1.ServiceExportConditionConflict))
}

// publish writes the export and its endpoint slices, this cluster's rows of namespace/name,
// and reports whether any row had to be written.
func publish(ctx context.Context, store *Store, exp Export, slices []Slice) (bool, error) {
	wroteExport, err := store.SyncExports(ctx, []Export{exp}, scopeOf(exp.Namespace, exp.Name))
	if err != nil {
		return false, fmt.Errorf("writing the export to the clusterset store: %w", err)
	}
	wroteSlices, err := store.SyncSlices(ctx, exp.Namespace, exp.Name, slices)
	if err != nil {
		return false, fmt.Errorf("writing the endpoints to the clusterset store: %w", err)
	}
	return wroteExport || wroteSlices, nil
}

// guard notes a publish: rows that had to be written again although what this cluster
// publishes is the same as at its last write (settleTime ago or more) were changed by
// someone else.
func (r *ExportReconciler) guard(se *mcsv1.ServiceExport, key types.NamespacedName, fp string, wrote bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.written == nil {
		r.written = map[types.NamespacedName]lastWrite{}
	}
	prev, ok := r.written[key]
	if !wrote {
		if !ok || prev.fingerprint != fp { // in the store already (a restart): from now on guarded
			r.written[key] = lastWrite{fingerprint: fp, at: time.Now()}
		}
		return
	}
	if ok && prev.fingerprint == fp && time.Since(prev.at) >= settleTime {
		msg := fmt.Sprintf("this cluster's export of %s in the clusterset store was changed by someone else and put back "+
			"(the store lets any AZ's certificate write it)", key)
		ctrl.Log.WithName("mcs-export").Info("put back this cluster's export in the clusterset store: someone else changed it", "export", key)
		r.Tamper.Note(1, msg)
		if r.Recorder != nil {
			r.Recorder.Event(se, corev1.EventTypeWarning, kovnv1.ReasonRecordTampered, msg)
		}
	}
	r.written[key] = lastWrite{fingerprint: fp, at: time.Now()}
}

// forget drops the guard of an export this cluster no longer publishes.
func (r *ExportReconciler) forget(key types.NamespacedName) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.written, key)
}

// fingerprint identifies what an export publishes, whatever order the cache listed its
// EndpointSlices in.
func fingerprint(exp Export, slices []Slice) string {
	sorted := sortedSlices(slices)
	b, err := json.Marshal(struct {
		Export Export
		Slices []Slice
	}{normalizeExport(exp), sorted})
	if err != nil {
		return fmt.Sprintf("%#v %#v", exp, slices)
	}
	return string(b)
}

// withdraw removes this cluster's export of namespace/name and its slices from the store.
func withdraw(ctx context.Context, store *Store, namespace, name string) error {
	if store == nil {
		return nil
	}
	if _, err := store.SyncSlices(ctx, namespace, name, nil); err != nil {
		return err
	}
	_, err := store.SyncExports(ctx, nil, scopeOf(namespace, name))
	return err
}

func scopeOf(namespace, name string) func(string, string) bool {
	return func(ns, n string) bool { return ns == namespace && n == name }
}

// setConflict sets the Conflict condition from the merged view of every cluster's export.
func setConflict(se *mcsv1.ServiceExport, im Import) {
	if len(im.Conflicts) == 0 {
		setExportCondition(se, mcsv1.ServiceExportConditionConflict, false, mcsv1.ServiceExportReasonNoConflicts, "")
		return
	}
	reasons := make([]string, len(im.Conflicts))
	for i, c := range im.Conflicts {
		reasons[i] = string(c)
	}
	setExportCondition(se, mcsv1.ServiceExportConditionConflict, true, mcsv1.ServiceExportConditionReason(strings.Join(reasons, ",")), im.Message)
}

func setExportCondition(se *mcsv1.ServiceExport, t mcsv1.ServiceExportConditionType, ok bool,
	reason mcsv1.ServiceExportConditionReason, msg string) {
	status := metav1.ConditionFalse
	if ok {
		status = metav1.ConditionTrue
	}
	meta.SetStatusCondition(&se.Status.Conditions, metav1.Condition{Type: string(t), Status: status, Reason: string(reason),
		Message: msg, ObservedGeneration: se.Generation})
}

func sortedSlices(in []Slice) []Slice {
	out := append([]Slice(nil), in...)
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}
