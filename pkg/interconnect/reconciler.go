package interconnect

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"

	libovsdb "github.com/ovn-org/libovsdb/client"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"

	kovnv1 "github.com/kovn/kovn/api/v1alpha1"
	"github.com/kovn/kovn/pkg/annotation"
	"github.com/kovn/kovn/pkg/cluster"
	"github.com/kovn/kovn/pkg/cluster/nbsync"
	"github.com/kovn/kovn/pkg/cluster/topology"
	"github.com/kovn/kovn/pkg/interconnect/ictls"
	"github.com/kovn/kovn/pkg/interconnect/tamper"
	"github.com/kovn/kovn/pkg/ovn"
	"github.com/kovn/kovn/pkg/ovn/model/nb"
)

// Name is the InterConnect singleton's name.
const Name = "default"

// Finalizer keeps a deleted InterConnect until its AZ is out of the clusterset.
const Finalizer = "kovn.io/interconnect"

// Reconciler makes the cluster an OVN-IC availability zone as its InterConnect says: the AZ
// name and route exchange options in NB_Global, the transit switch in IC-NB, the cluster
// router's gateway port on it, gateway nodes marked for their daemons, allow policies for
// learned prefixes. IC-SB changes (peers, routes, gateway bindings) re-queue it.
type Reconciler struct {
	client.Client
	State    *cluster.State
	NB       libovsdb.Client
	Recorder record.EventRecorder

	// Health reads the southbound database (chassis bindings and how far each ovn-controller
	// has caught up) for the gateway hold; nil: no gateway is held.
	Health *cluster.GatewayHealth

	// TLS gives the IC database clients this AZ's certificate (ssl: endpoints); nil: tcp only.
	TLS *ictls.Loader

	ic       icConn
	icEvents chan event.GenericEvent
	holds    holds
	pending  pendingKeys // transit keys waiting for the gateways (transitKeysDue)
	lastView azMetrics   // the peers the last fillStatus read, for the metrics

	// foreignGood is each ForeignAZ's last valid spec (programmed while its spec is invalid);
	// peered the ForeignAZs whose shards were applied (removed when the object goes).
	foreignGood map[string]ForeignIn
	peered      map[string]bool

	// Tamper records repairs of this AZ's rows (guardRecord, the MCS export writer) for
	// Degraded; nil records nothing.
	Tamper *tamper.Log
	// Peers, if set, says whether the other clusters' published policy peers follow the
	// clusterset store (ClustersetPeersCurrent).
	Peers interface{ Current() (bool, time.Time) }
	// declared guards this AZ's declarations in IC_NB_Global (declareGuarded), icsbRows its
	// rows in IC-SB (guardICSB).
	declared declGuard
	icsbRows icsbGuard
	// unknown remembers the AZs on kovn's transit switches without a join record (noteUnknown).
	unknown unknownWatch
}

// clusterUID is the UID of the cluster's kube-system namespace, which names the cluster that
// holds an AZ name (azOwnerKeyPrefix): it lives as long as the cluster and no tenant sets it.
func (r *Reconciler) clusterUID(ctx context.Context) (string, error) {
	var ns corev1.Namespace
	if err := r.Get(ctx, client.ObjectKey{Name: metav1.NamespaceSystem}, &ns); err != nil {
		return "", fmt.Errorf("reading this cluster's identity (namespace kube-system): %w", err)
	}
	if ns.UID == "" {
		return "", errors.New("namespace kube-system has no UID")
	}
	return string(ns.UID), nil
}

// +kubebuilder:rbac:groups=kovn.io,resources=interconnects,verbs=get;list;watch;update
// +kubebuilder:rbac:groups=kovn.io,resources=interconnects/status,verbs=get;update;patch
// +kubebuilder:rbac:groups="",resources=nodes,verbs=get;list;watch;patch

// Reconcile implements reconcile.Reconciler.
func (r *Reconciler) Reconcile(ctx context.Context, _ ctrl.Request) (res ctrl.Result, err error) {
	statusCtx := ctx // the status is written even when the pass ran out of time
	ctx, cancel := context.WithTimeout(ctx, ovn.ReconcileTimeout)
	defer cancel()
	var ic kovnv1.InterConnect
	if err := r.Get(ctx, client.ObjectKey{Name: Name}, &ic); err != nil {
		if client.IgnoreNotFound(err) != nil {
			return ctrl.Result{}, err
		}
		return ctrl.Result{}, r.leave(ctx, nil)
	}
	if !ic.DeletionTimestamp.IsZero() {
		if err := r.leave(ctx, &ic); err != nil {
			return ctrl.Result{}, err
		}
		if controllerutil.RemoveFinalizer(&ic, Finalizer) {
			return ctrl.Result{}, r.Update(ctx, &ic)
		}
		return ctrl.Result{}, nil
	}
	if controllerutil.AddFinalizer(&ic, Finalizer) {
		if err := r.Update(ctx, &ic); err != nil {
			return ctrl.Result{}, err
		}
	}
	before := ic.DeepCopy()
	defer func() {
		ic.Status.ObservedGeneration = ic.Generation
		r.notePeers(&ic)
		r.exportMetrics(&ic)
		if perr := r.Status().Patch(statusCtx, &ic, client.MergeFrom(before)); perr != nil && err == nil {
			err = perr
		}
	}()
	spec, err := parseSpec(&ic.Spec)
	if err != nil {
		setCondition(&ic, kovnv1.ConditionValidated, false, kovnv1.ReasonValidationFailed, err.Error())
		setCondition(&ic, kovnv1.ConditionReady, false, kovnv1.ReasonValidationFailed, "spec invalid: "+err.Error())
		return ctrl.Result{}, nil // the last good state stays programmed
	}
	setCondition(&ic, kovnv1.ConditionValidated, true, kovnv1.ReasonValid, "")
	setCondition(&ic, kovnv1.ConditionSupported, true, "Supported", "")
	return r.join(ctx, &ic, spec)
}

// readiness sets Ready from what was applied and what OVN-IC reports, and says when to look again.
// keysDue is false while new transit keys wait for the gateways (transitKeysDue).
func readiness(ic *kovnv1.InterConnect, in Input, cs clusterset, applyErr error, keysDue bool) (ctrl.Result, error) {
	unbound := slices.ContainsFunc(in.TransitSwitches, func(ts string) bool { return cs.portGateway[SwitchPortName(in.AZ, ts)] == "" })
	unkeyed := slices.ContainsFunc(in.TransitSwitches, func(ts string) bool { return in.SwitchPortKeys[SwitchPortName(in.AZ, ts)] == "" })
	switch {
	case len(in.Gateways) == 0:
		setCondition(ic, kovnv1.ConditionReady, false, kovnv1.ReasonNoGateway, "no gateway node exists: nothing crosses clusters")
		return ctrl.Result{}, nil
	case errors.Is(applyErr, nbsync.ErrParentMissing):
		setCondition(ic, kovnv1.ConditionReady, false, kovnv1.ReasonWaitingForOVNIC,
			fmt.Sprintf("waiting for ovn-ic to create transit switch %s in this AZ", DefaultTransitSwitch))
		return ctrl.Result{RequeueAfter: time.Second}, nil
	case applyErr != nil:
		setCondition(ic, kovnv1.ConditionReady, false, kovnv1.ReasonReconcileFailed, applyErr.Error())
		return ctrl.Result{}, applyErr
	case len(ic.Status.ActiveGateways) == 0 || unbound:
		setCondition(ic, kovnv1.ConditionReady, false, kovnv1.ReasonWaitingForOVNIC, "transit ports not bound to a gateway in OVN-IC yet")
		return ctrl.Result{RequeueAfter: 2 * time.Second}, nil
	case unkeyed:
		// The router ports carry their peers' keys once ovn-ic gave them (PeerTunnelKeyID).
		setCondition(ic, kovnv1.ConditionReady, false, kovnv1.ReasonWaitingForOVNIC, "transit ports not keyed by ovn-ic yet")
		return ctrl.Result{RequeueAfter: time.Second}, nil
	case !keysDue:
		setCondition(ic, kovnv1.ConditionReady, false, kovnv1.ReasonWaitingForOVNIC,
			"waiting for the gateways' ovn-controllers to install the transit ports' keys")
		return ctrl.Result{RequeueAfter: 200 * time.Millisecond}, nil
	}
	setCondition(ic, kovnv1.ConditionReady, true, kovnv1.ReasonReconciled,
		fmt.Sprintf("AZ %s joined with %d peer(s)", in.AZ, len(cs.peers(in.AZ))))
	return ctrl.Result{RequeueAfter: time.Minute}, nil
}

// input resolves everything For needs.
// renamedFrom is the AZ's previous name while it is renamed.
func (r *Reconciler) input(ctx context.Context, ic *kovnv1.InterConnect, spec parsedSpec, nodes []corev1.Node, gateways []string, cs clusterset, renamedFrom string) (Input, error) {
	in := Input{AZ: ic.Spec.AZName, Router: r.State.Opts.DefaultVpc, Gateways: gateways,
		AdvertiseCIDRs: spec.advertise, RefuseCIDRs: spec.refuse, Remote: cs.remoteRoutes(ic.Spec.AZName), BFD: spec.bfd}
	join := r.State.Join()
	if join == nil {
		return in, errors.New("the join subnet is not programmed yet")
	}
	in.JoinCIDRs = join.CIDRs
	for _, c := range join.CIDRs {
		in.IPv4, in.IPv6 = in.IPv4 || c.Addr().Is4(), in.IPv6 || c.Addr().Is6()
	}
	for _, sn := range r.State.Subnets() {
		if sn.Vpc == in.Router && sn.Name != join.Name {
			in.LocalCIDRs = append(in.LocalCIDRs, sn.CIDRs...)
		}
	}
	for _, n := range nodes {
		for _, a := range n.Status.Addresses {
			if a.Type == corev1.NodeInternalIP {
				if ip, err := netip.ParseAddr(a.Address); err == nil {
					in.NodeIPs = append(in.NodeIPs, ip)
				}
			}
		}
	}
	names := []string{in.AZ}
	if renamedFrom != "" {
		names = append(names, renamedFrom) // keep the number the old name's port has
	}
	idx, err := cs.transitIndex(r.currentTransitIndex(ctx, names...), names...)
	in.TransitIndex = idx
	return in, err
}

// currentTransitIndex is the host number the AZ's transit port (under the first of its names
// that has one) has now (0: none).
func (r *Reconciler) currentTransitIndex(ctx context.Context, names ...string) int {
	var lrp *nb.LogicalRouterPort
	var err error
	for _, az := range names {
		if lrp, err = lookupRouterPort(ctx, r.NB, RouterPortName(az, DefaultTransitSwitch)); err == nil {
			break
		}
	}
	if err != nil {
		return 0
	}
	for _, n := range lrp.Networks {
		if p, err := netip.ParsePrefix(n); err == nil && TransitCIDR4.Contains(p.Addr()) {
			return int(p.Addr().As4()[3])
		} else if err == nil && TransitCIDR6.Contains(p.Addr()) {
			return int(p.Addr().As16()[15])
		}
	}
	return 0
}

// activeGateways are the chassis OVN-IC reports holding one of the AZ's transit ports, in
// the order of in.Gateways (a chassis that is no gateway any more last).
func activeGateways(in Input, cs clusterset) []string {
	var out []string
	for _, ts := range in.TransitSwitches {
		if g := cs.portGateway[SwitchPortName(in.AZ, ts)]; g != "" && !slices.Contains(out, g) {
			out = append(out, g)
		}
	}
	slices.SortStableFunc(out, func(a, b string) int { return rank(in.Gateways, a) - rank(in.Gateways, b) })
	return out
}

func rank(list []string, s string) int {
	if i := slices.Index(list, s); i >= 0 {
		return i
	}
	return len(list)
}

// fillStatus writes what was programmed and what IC-SB reports.
func (r *Reconciler) fillStatus(ic *kovnv1.InterConnect, in Input, d Desired, cs clusterset) {
	st := &ic.Status
	st.AZName = in.AZ
	active := activeGateways(in, cs)
	st.Gateways, st.ActiveGateways = nil, nil
	// As the default transit switch ranks them (held gateways last).
	for i, g := range portOrder(in, 0) {
		on := slices.Contains(active, g)
		gw := kovnv1.InterConnectGateway{Node: g, Priority: int32(topGatewayPriority - i), Active: on}
		if hold, ok := r.holds.held[g]; ok {
			gw.Held = &hold
		}
		st.Gateways = append(st.Gateways, gw)
		if on {
			st.ActiveGateways = append(st.ActiveGateways, g)
		}
	}
	st.Advertised = prefixStrings(cs.routes[in.AZ])
	r.lastView.readPeers(in.AZ, cs, len(d.Conflicts))
	st.Peers = nil
	for _, az := range cs.peers(in.AZ) {
		st.Peers = append(st.Peers, kovnv1.InterConnectPeer{AZ: az, Gateways: cs.gateways[az], Routes: prefixStrings(cs.routes[az])})
	}
	r.routesAccepted(ic, d)
}

// routesAccepted sets RoutesAccepted: False naming each conflict with a local subnet
// (RouteConflict) and each route a peer may not claim (RouteRefused), with an event when the
// message changes.
func (r *Reconciler) routesAccepted(ic *kovnv1.InterConnect, d Desired) {
	if len(d.Conflicts) == 0 && len(d.Refused) == 0 {
		setCondition(ic, kovnv1.ConditionRoutesAccepted, true, kovnv1.ReasonNoConflict, "")
		return
	}
	var parts []string
	reason := kovnv1.ReasonRouteConflict
	if len(d.Conflicts) > 0 {
		var msgs []string
		for _, c := range d.Conflicts {
			msgs = append(msgs, c.String())
		}
		parts = append(parts, fmt.Sprintf("not routed to: %v", msgs))
	}
	if len(d.Refused) > 0 {
		if len(d.Conflicts) == 0 {
			reason = kovnv1.ReasonRouteRefused
		}
		var msgs []string
		for _, rr := range d.Refused {
			msgs = append(msgs, rr.String())
		}
		parts = append(parts, fmt.Sprintf("refused, never routed to: %v", msgs))
	}
	msg := strings.Join(parts, "; ")
	if c := meta.FindStatusCondition(ic.Status.Conditions, kovnv1.ConditionRoutesAccepted); (c == nil || c.Message != msg) && r.Recorder != nil {
		r.Recorder.Event(ic, corev1.EventTypeWarning, reason, msg)
	}
	setCondition(ic, kovnv1.ConditionRoutesAccepted, false, reason, msg)
}

// gatewayNodes resolves the gateway nodes that exist, in preference order: the spec's list,
// else the nodes its selector matches (all nodes without either), sorted by name.
func gatewayNodes(spec *kovnv1.InterConnectSpec, nodes []corev1.Node) ([]string, error) {
	return cluster.ChooseNodes(spec.GatewayNodes, spec.GatewaySelector, nodes)
}

// publishTransitKeys annotates the gateway nodes with the tunnel keys ovn-ic gave the transit
// switch ports (their daemons copy them into Open_vSwitch, so ovn-controller rebuilds its
// physical flows after a re-key); other nodes lose the annotation.
func (r *Reconciler) publishTransitKeys(ctx context.Context, nodes []corev1.Node, gateways []string, keys map[string]string) error {
	return r.annotateGateways(ctx, nodes, gateways, annotation.ICTransitKeys, joinKeys(keys))
}

// markGateways annotates the gateway nodes (their daemons then set ovn-is-interconn, which
// makes ovn-ic publish them to the other AZs) and unmarks every other node.
func (r *Reconciler) markGateways(ctx context.Context, nodes []corev1.Node, gateways []string) error {
	return r.annotateGateways(ctx, nodes, gateways, annotation.ICGateway, "true")
}

// annotateGateways sets annotation key to value on the gateway nodes and removes it from the
// others (from all when value is empty), patching only the nodes that differ.
func (r *Reconciler) annotateGateways(ctx context.Context, nodes []corev1.Node, gateways []string, key, value string) error {
	for i := range nodes {
		n := nodes[i].DeepCopy()
		want := ""
		if slices.Contains(gateways, n.Name) {
			want = value
		}
		if n.Annotations[key] == want {
			continue
		}
		patch := client.MergeFrom(n.DeepCopy())
		if want != "" {
			metav1.SetMetaDataAnnotation(&n.ObjectMeta, key, want)
		} else {
			delete(n.Annotations, key)
		}
		if err := r.Patch(ctx, n, patch); err != nil {
			return err
		}
	}
	return nil
}

// leave takes the cluster out: its ports and policies go, the AZ name and exchange options are
// cleared (ovn-ic stops), nodes are unmarked, and the AZ's rows are deleted from IC-SB, so
// every other cluster drops its routes to it at once. ic is the object being deleted (its
// finalizer kept it); nil when it is gone already, and only the local side can be cleaned.
func (r *Reconciler) leave(ctx context.Context, ic *kovnv1.InterConnect) error {
	if _, err := nbsync.Apply(ctx, r.NB, topology.Shard{OwnerType: OwnerInterConnect, Owner: Name}); err != nil {
		return err
	}
	if err := r.removeForeign(ctx); err != nil {
		return err
	}
	if err := applyNBGlobal(ctx, r.NB, "", cluster.GatewayBFDOptions); err != nil { // the cluster's own BFD timers back
		return err
	}
	var nodes corev1.NodeList
	if err := r.List(ctx, &nodes); err != nil {
		return err
	}
	if err := r.publishTransitKeys(ctx, nodes.Items, nil, nil); err != nil {
		return err
	}
	if err := r.markGateways(ctx, nodes.Items, nil); err != nil {
		return err
	}
	if err := r.annotateGateways(ctx, nodes.Items, nil, annotation.ICPeerGateways, ""); err != nil {
		return err
	}
	if ic != nil {
		if ok := r.loadCredentials(ctx, ic); !ok {
			return fmt.Errorf("leaving the clusterset: no usable credentials in Secret %s", ictls.SecretName(&ic.Spec))
		}
		icnbc, icsbc, err := r.ic.connect(ctx, ic.Spec.ICNorthbound, ic.Spec.ICSouthbound, r.credentials(), nil)
		if err != nil {
			return fmt.Errorf("leaving the clusterset: %w", err)
		}
		owner, err := r.clusterUID(ctx)
		if err != nil {
			return err
		}
		for _, az := range slices.Compact([]string{ic.Status.AZName, ic.Spec.AZName}) {
			if az == "" || heldByOther(ctx, icnbc, az, owner) != "" {
				continue // another cluster's AZ (an azName that was refused): never removed from here
			}
			if err := removeAZ(ctx, icsbc, az); err != nil {
				return fmt.Errorf("removing AZ %s from IC-SB: %w", az, err)
			}
			if err := forgetJoin(ctx, icnbc, az, owner); err != nil {
				return fmt.Errorf("removing AZ %s's join record from IC-NB: %w", az, err)
			}
		}
	}
	r.ic.close()
	r.holds = holds{} // a cluster that joins again starts with no history
	r.lastView = azMetrics{}
	resetICMetrics()
	return nil
}

// loadCredentials reads the InterConnect's TLS Secret and says so in CredentialsReady (an
// event too when it turns bad); false when no credentials at all are usable. A broken Secret
// after a good one keeps the good credentials in use.
func (r *Reconciler) loadCredentials(ctx context.Context, ic *kovnv1.InterConnect) bool {
	if !ictls.NeedsTLS(&ic.Spec) {
		setCondition(ic, kovnv1.ConditionCredentialsReady, true, kovnv1.ReasonPlainTCP,
			"insecurePlainTCP: the IC databases are reached without authentication")
		return true
	}
	if r.TLS == nil {
		setCondition(ic, kovnv1.ConditionCredentialsReady, false, kovnv1.ReasonCredentialsInvalid,
			"kovn-controller has no clusterset credentials loader: ssl: endpoints cannot be used")
		return false
	}
	usable, err := r.TLS.Refresh(ctx, &ic.Spec)
	if names := r.TLS.Names(); err == nil && !slices.Contains(names, ic.Spec.AZName) {
		err = errAZNotCertified(ic, r.TLS.Describe(), names)
	}
	if err == nil {
		setCondition(ic, kovnv1.ConditionCredentialsReady, true, kovnv1.ReasonCredentialsLoaded,
			"certificate "+r.TLS.Describe()+" from Secret "+ictls.SecretName(&ic.Spec))
		return true
	}
	msg := err.Error()
	if usable {
		msg += "; the last good certificate stays in use"
	}
	if c := meta.FindStatusCondition(ic.Status.Conditions, kovnv1.ConditionCredentialsReady); (c == nil || c.Status != metav1.ConditionFalse) && r.Recorder != nil {
		r.Recorder.Event(ic, corev1.EventTypeWarning, kovnv1.ReasonCredentialsInvalid, msg)
	}
	setCondition(ic, kovnv1.ConditionCredentialsReady, false, kovnv1.ReasonCredentialsInvalid, msg)
	return usable
}

// credentials is what the IC clients present, nil without a loader.
func (r *Reconciler) credentials() ovn.CredentialSource {
	if r.TLS == nil || r.TLS.Creds == nil {
		return nil
	}
	return r.TLS
}

// notePeers sets ClustersetPeersCurrent: False while policies select the other clusters'
// pods from the last rows read because the clusterset store is away.
func (r *Reconciler) notePeers(ic *kovnv1.InterConnect) {
	if r.Peers == nil {
		return
	}
	if current, since := r.Peers.Current(); !current {
		setCondition(ic, kovnv1.ConditionClustersetPeersCurrent, false, kovnv1.ReasonStoreUnreachable,
			fmt.Sprintf("the clusterset store is unreachable since %s: policies keep the other clusters' pods as last read", since.UTC().Format(time.RFC3339)))
		return
	}
	setCondition(ic, kovnv1.ConditionClustersetPeersCurrent, true, kovnv1.ReasonFollowingStore, "")
}

func setCondition(ic *kovnv1.InterConnect, t string, ok bool, reason, msg string) {
	kovnv1.SetCondition(&ic.Status.Conditions, ic.Generation, t, ok, reason, msg)
}
