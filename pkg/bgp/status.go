package bgp

import (
	"context"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/record"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	kovnv1 "github.com/kovn/kovn/api/v1alpha1"
)

// Per-node conditions of a BgpPeer session: Established, and PrefixLimitReached while the
// session is held down because the peer sent more than maxPrefixes (absent otherwise).
const (
	ConditionEstablished        = "Established"
	ConditionPrefixLimitReached = "PrefixLimitReached"
	// ReasonPrefixLimitReached is the reason of both conditions then (and of the event).
	ReasonPrefixLimitReached = "PrefixLimitReached"
)

var (
	metricEstablished = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "kovn_bgp_session_established",
		Help: "1 while the session with the BgpPeer is Established, else 0."}, []string{"peer", "address"})
	metricSent = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "kovn_bgp_prefixes_sent",
		Help: "Prefixes announced to the BgpPeer."}, []string{"peer", "address"})
	metricReceived = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "kovn_bgp_prefixes_received",
		Help: "Prefixes received from the BgpPeer."}, []string{"peer", "address"})
	metricFlaps = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "kovn_bgp_session_flaps",
		Help: "Times the session went down from Established since the speaker started."}, []string{"peer", "address"})
	metricRoutes = prometheus.NewGauge(prometheus.GaugeOpts{Name: "kovn_bgp_routes_announced",
		Help: "Routes this node's speaker announces."})
	metricImported = prometheus.NewGauge(prometheus.GaugeOpts{Name: "kovn_bgp_routes_imported",
		Help: "Routes this node's speaker took from its peers into its table: always 0, as it imports nothing."})
)

func init() {
	metrics.Registry.MustRegister(metricEstablished, metricSent, metricReceived, metricFlaps, metricRoutes, metricImported)
}

// StatusWriter publishes this node's sessions into the BgpPeers' status, each node its own
// entry of status.nodes through server-side apply (a field manager per node, so speakers never
// overwrite each other), and only when something a reader cares about changed (not every
// second of uptime). It also keeps the per-peer metrics and emits an event on every change of
// session state.
type StatusWriter struct {
	Client     client.Client
	Node       string
	Speaker    Speaker
	Reconciler *Reconciler
	Recorder   record.EventRecorder
	Interval   time.Duration

	written map[string]kovnv1.BgpPeerNodeStatus
}

// Start runs until ctx ends (a manager Runnable).
func (w *StatusWriter) Start(ctx context.Context) error {
	if w.Interval == 0 {
		w.Interval = time.Second
	}
	w.written = map[string]kovnv1.BgpPeerNodeStatus{}
	t := time.NewTicker(w.Interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			if err := w.sync(ctx); err != nil {
				log.FromContext(ctx).Info("BgpPeer status not written; retrying", "err", err)
			}
		}
	}
}

func (w *StatusWriter) sync(ctx context.Context) error {
	plan, routes := w.Reconciler.Plan()
	metricRoutes.Set(float64(len(routes)))
	states, err := w.Speaker.PeerStates(ctx)
	if err != nil {
		return err
	}
	// Only a metric: a failed count must not hold back the sessions' status.
	if imported, err := w.Speaker.ImportedRoutes(ctx); err == nil {
		metricImported.Set(float64(imported))
	} else {
		log.FromContext(ctx).V(1).Info("imported routes not counted", "err", err)
	}
	byName := map[string]PeerState{}
	for _, st := range states {
		byName[st.Name] = st
		l := prometheus.Labels{"peer": st.Name, "address": st.Address.String()}
		metricEstablished.With(l).Set(map[bool]float64{true: 1}[st.State == string(kovnv1.BgpStateEstablished)])
		metricSent.With(l).Set(float64(st.Sent))
		metricReceived.With(l).Set(float64(st.Received))
		metricFlaps.With(l).Set(float64(st.Flaps))
	}
	selected := map[string]bool{}
	for _, name := range plan.Selected {
		selected[name] = true
		st, hasSession := byName[name]
		prev, wrote := w.written[name]
		entry := nodeStatus(w.Node, st, hasSession, plan.Errors[name], prev)
		if wrote && sameStatus(prev, entry) {
			continue
		}
		if err := w.apply(ctx, name, &entry); err != nil {
			return err
		}
		w.event(name, prev, wrote, entry)
		w.written[name] = entry
	}
	for name := range w.written {
		if !selected[name] { // no longer peers from this node: drop our entry
			if err := w.apply(ctx, name, nil); err != nil && !isNotFound(err) {
				return err
			}
			delete(w.written, name)
		}
	}
	return nil
}

// nodeStatus is the status entry for one session (or the reason it has none).
func nodeStatus(node string, st PeerState, hasSession bool, planErr string, prev kovnv1.BgpPeerNodeStatus) kovnv1.BgpPeerNodeStatus {
	e := kovnv1.BgpPeerNodeStatus{Node: node, State: kovnv1.BgpStateIdle}
	switch {
	case planErr != "":
		e.LastError = planErr
	case hasSession:
		e.State = kovnv1.BgpSessionState(st.State)
		e.PrefixesSent, e.PrefixesReceived = int32(st.Sent), int32(st.Received)
		if st.LocalAddress.IsValid() {
			e.LocalAddress = st.LocalAddress.String()
		}
		if !st.EstablishedSince.IsZero() {
			since := metav1.NewTime(st.EstablishedSince.Truncate(time.Second))
			e.EstablishedSince = &since
		}
		if e.State != kovnv1.BgpStateEstablished {
			e.LastError = st.LastError
		}
		if st.PrefixLimitHit > 0 {
			e.LastError = heldDownMessage(node, st.PrefixLimitHit)
		}
	default:
		e.LastError = "no session configured yet"
	}
	heldDown := hasSession && planErr == "" && st.PrefixLimitHit > 0
	cond := metav1.Condition{Type: ConditionEstablished, Status: metav1.ConditionFalse, Reason: string(e.State), Message: e.LastError}
	switch {
	case e.State == kovnv1.BgpStateEstablished:
		cond.Status, cond.Message = metav1.ConditionTrue, fmt.Sprintf("session up from %s", e.LocalAddress)
	case planErr != "":
		cond.Reason = "InvalidPeer"
	case heldDown:
		cond.Reason = ReasonPrefixLimitReached
	}
	e.Conditions = append([]metav1.Condition(nil), prev.Conditions...)
	meta.SetStatusCondition(&e.Conditions, cond)
	setPrefixLimitCondition(&e.Conditions, heldDown, e.LastError)
	return e
}

// heldDownMessage says why a session is held down, and what lifts it.
func heldDownMessage(node string, limit uint32) string {
	return fmt.Sprintf("%s: the peer sent more than maxPrefixes (%d) prefixes: session held down until the BgpPeer changes or the speaker restarts",
		node, limit)
}

// setPrefixLimitCondition keeps the PrefixLimitReached condition only while the session is
// held down for its prefix limit: an entry without it reads as "within the limit".
func setPrefixLimitCondition(conds *[]metav1.Condition, heldDown bool, msg string) {
	if !heldDown {
		meta.RemoveStatusCondition(conds, ConditionPrefixLimitReached)
		return
	}
	meta.SetStatusCondition(conds, metav1.Condition{Type: ConditionPrefixLimitReached, Status: metav1.ConditionTrue,
		Reason: ReasonPrefixLimitReached, Message: msg})
}

func sameStatus(a, b kovnv1.BgpPeerNodeStatus) bool {
	return a.State == b.State && a.LocalAddress == b.LocalAddress && a.PrefixesSent == b.PrefixesSent &&
		a.PrefixesReceived == b.PrefixesReceived && a.LastError == b.LastError &&
		a.EstablishedSince.Equal(b.EstablishedSince) && sameConditions(a.Conditions, b.Conditions)
}

// sameConditions: the same condition types with equal contents (transition times included,
// which nodeStatus carries over while a condition does not change).
func sameConditions(a, b []metav1.Condition) bool {
	if len(a) != len(b) || meta.FindStatusCondition(a, ConditionEstablished) == nil {
		return false
	}
	for _, ca := range a {
		if cb := meta.FindStatusCondition(b, ca.Type); cb == nil || *cb != ca {
			return false
		}
	}
	return true
}

// apply writes this node's entry of peer's status.nodes and its name in establishedNodes while
// the session is up (nil: removes both). Server-side apply merges each speaker's elements.
func (w *StatusWriter) apply(ctx context.Context, peer string, entry *kovnv1.BgpPeerNodeStatus) error {
	nodes, established := []any{}, []any{}
	if entry != nil {
		m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(entry)
		if err != nil {
			return err
		}
		nodes = append(nodes, m)
		if entry.State == kovnv1.BgpStateEstablished {
			established = append(established, w.Node)
		}
	}
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": kovnv1.GroupVersion.String(), "kind": "BgpPeer", "metadata": map[string]any{"name": peer},
		"status": map[string]any{"nodes": nodes, "establishedNodes": established}}}
	return w.Client.Status().Patch(ctx, u, client.Apply, client.FieldOwner("kovn-speaker-"+w.Node), client.ForceOwnership)
}

// event tells of a new session state, or of a session just held down for its prefix limit.
func (w *StatusWriter) event(peer string, prev kovnv1.BgpPeerNodeStatus, wrote bool, e kovnv1.BgpPeerNodeStatus) {
	limitHit := meta.IsStatusConditionTrue(e.Conditions, ConditionPrefixLimitReached) &&
		!meta.IsStatusConditionTrue(prev.Conditions, ConditionPrefixLimitReached)
	if w.Recorder == nil || (!limitHit && wrote && prev.State == e.State) {
		return
	}
	obj := &kovnv1.BgpPeer{}
	if err := w.Client.Get(context.Background(), client.ObjectKey{Name: peer}, obj); err != nil {
		return
	}
	switch {
	case limitHit:
		w.Recorder.Event(obj, corev1.EventTypeWarning, ReasonPrefixLimitReached, e.LastError)
	case e.State == kovnv1.BgpStateEstablished:
		w.Recorder.Eventf(obj, corev1.EventTypeNormal, "SessionEstablished", "%s: session established from %s", e.Node, e.LocalAddress)
	default:
		w.Recorder.Eventf(obj, corev1.EventTypeWarning, "SessionNotEstablished", "%s: session %s: %s", e.Node, e.State, e.LastError)
	}
}

func isNotFound(err error) bool { return client.IgnoreNotFound(err) == nil }
