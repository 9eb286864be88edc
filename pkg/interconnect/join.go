package interconnect

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	libovsdb "github.com/ovn-org/libovsdb/client"
	corev1 "k8s.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"

	kovnv1 "github.com/kovn/kovn/api/v1alpha1"
	"github.com/kovn/kovn/pkg/cluster/nbsync"
	"github.com/kovn/kovn/pkg/interconnect/ictls"
	"github.com/kovn/kovn/pkg/interconnect/tamper"
)

// joinRun carries one join reconcile through its phases: what the earlier phases read or
// decided, for the later ones.
type joinRun struct {
	ic   *kovnv1.InterConnect
	spec parsedSpec

	icnb, icsb  libovsdb.Client
	renamedFrom string // the AZ's previous name while it is renamed
	joined      map[string]time.Time
	nodes       []corev1.Node
	gateways    []string
	ecmp        bool

	cs       clusterset
	peerings []foreignPeering
	in       Input

	keysDue bool // the transit keys may be published (transitKeysDue)
	holding bool // a gateway is held (updateHolds)
	waiting bool // a ForeignAZ waits for ovn-ic (applyForeign)
}

// join programs everything for a valid spec and fills the status. It runs in phases, and
// their order matters:
//
//  1. enter: the writes the reads depend on. In IC-NB a renamed AZ's join record moves to the
//     new name before the join is recorded (else the AZ would lose its precedence in
//     conflicts), and the transit switches are created; the gateway nodes are marked at once,
//     so their daemons set ovn-is-interconn and ovn-ic publishes them.
//  2. read: IC-NB's transit switches and the other AZs' withdrawals, IC-SB's clusterset, the
//     ForeignAZs (whose transit switches are created in IC-NB as they resolve), the cluster's
//     subnets and NB's transit ports, into the Input of For.
//  3. gateway handshake, which bumps NB_Global.nb_cfg: new transit keys wait for the
//     gateways' ovn-controllers before they are published to the nodes, and gateways OVN just
//     failed over from are held (that changes the Input's gateway order).
//  4. compute: For, pure.
//  5. write, one database after the other: IC-NB (this AZ's withdrawals); NB, NB_Global before
//     the shard (ovn-ic creates the transit switches only in an AZ it knows by name, and the
//     transit ports need them); IC-SB, where a renamed AZ's old row goes only once the new
//     name's ports are in NB, so the peers swap its routes at once; then NB again, the
//     ForeignAZs' peering shards (and their status).
//  6. status and when to look again.
func (r *Reconciler) join(ctx context.Context, ic *kovnv1.InterConnect, spec parsedSpec) (ctrl.Result, error) {
	run := &joinRun{ic: ic, spec: spec}
	if reachable := r.connectIC(ctx, run); !reachable {
		return ctrl.Result{RequeueAfter: 5 * time.Second}, nil
	}
	if err := r.enter(ctx, run); err != nil {
		return ctrl.Result{}, err
	}
	if err := r.readJoin(ctx, run); err != nil {
		return ctrl.Result{}, err
	}
	if err := r.publishPeerGateways(ctx, run); err != nil {
		return ctrl.Result{}, err
	}
	if err := r.gatewayHandshake(ctx, run); err != nil {
		return ctrl.Result{}, err
	}
	d := For(run.in)
	applyErr, foreignErr, err := r.writeDesired(ctx, run, d)
	if err != nil {
		return ctrl.Result{}, err
	}
	if err := r.guardICSB(ctx, run, d); err != nil {
		return ctrl.Result{}, err
	}
	r.fillStatus(ic, run.in, d, run.cs)
	unknownWaiting := r.noteUnknown(run)
	res, err := readiness(ic, run.in, run.cs, applyErr, run.keysDue)
	if err == nil {
		err = foreignErr
	}
	res = requeue(res, err, run.waiting, run.holding)
	if unknownWaiting && (res.RequeueAfter == 0 || res.RequeueAfter > unknownSettle) {
		res.RequeueAfter = unknownSettle
	}
	return res, err
}

// connectIC connects to IC-NB and IC-SB; false (with Ready saying why) while either cannot be
// reached or does not answer.
func (r *Reconciler) connectIC(ctx context.Context, run *joinRun) bool {
	ic := run.ic
	if !r.loadCredentials(ctx, ic) {
		setCondition(ic, kovnv1.ConditionReady, false, kovnv1.ReasonCredentialsInvalid,
			"no usable clusterset certificate: see CredentialsReady")
		return false
	}
	var err error
	run.icnb, run.icsb, err = r.ic.connect(ctx, ic.Spec.ICNorthbound, ic.Spec.ICSouthbound, r.credentials(), r.icEvents)
	if err != nil {
		setCondition(ic, kovnv1.ConditionReady, false, kovnv1.ReasonICUnreachable, err.Error())
		return false
	}
	if down := r.ic.unanswered(); len(down) > 0 {
		setCondition(ic, kovnv1.ConditionReady, false, kovnv1.ReasonICUnreachable, fmt.Sprintf(
			"%s not answering: routes and Services learned from the other clusters stay as last programmed; "+
				"changes wait until it answers", strings.Join(down, " and ")))
		return false
	}
	return true
}

// enter records the join in IC-NB (moving a renamed AZ's record first), marks the gateway
// nodes and creates the transit switches: the default one, and in ECMP mode one per gateway
// (at most MaxTransitSwitches); the AZ joins every kovn transit switch that exists, so an ECMP
// peer spreads both ways.
func (r *Reconciler) enter(ctx context.Context, run *joinRun) error {
	ic := run.ic
	owner, err := r.clusterUID(ctx)
	if err != nil {
		return err
	}
	if names := r.certifiedNames(ic); names != nil && !slices.Contains(names, ic.Spec.AZName) &&
		heldByOther(ctx, run.icnb, ic.Spec.AZName, owner) == "" { // a taken name is reported as taken, below
		// Like a taken name: nothing changes, the AZ stays under the name it has.
		err := errAZNotCertified(ic, r.TLS.Describe(), names)
		setCondition(ic, kovnv1.ConditionReady, false, kovnv1.ReasonAZNameNotCertified, err.Error())
		return err
	}
	if old := ic.Status.AZName; old != "" && old != ic.Spec.AZName {
		// A rename keeps the AZ's join time (its precedence in conflicts).
		if err := renameJoin(ctx, run.icnb, old, ic.Spec.AZName, owner); err != nil {
			return claimFailed(ic, err)
		}
		run.renamedFrom = old
	}
	joinTime, err := r.guardRecord(ctx, run, owner)
	if err != nil {
		setCondition(ic, kovnv1.ConditionReady, false, kovnv1.ReasonReconcileFailed, "checking the join record in IC-NB: "+err.Error())
		return err
	}
	if run.joined, err = claimJoin(ctx, run.icnb, ic.Spec.AZName, owner, joinTime); err != nil {
		return claimFailed(ic, err)
	}
	if t, ok := run.joined[ic.Spec.AZName]; ok {
		ic.Status.JoinedAt = t.UTC().Format(time.RFC3339Nano)
	}
	var nodes corev1.NodeList
	if err := r.List(ctx, &nodes); err != nil {
		return err
	}
	run.nodes = nodes.Items
	if run.gateways, err = gatewayNodes(&ic.Spec, run.nodes); err != nil {
		return err
	}
	if err := r.markGateways(ctx, run.nodes, run.gateways); err != nil {
		return err
	}
	run.ecmp = ic.Spec.Mode == kovnv1.GatewayECMP
	for i := 0; i == 0 || run.ecmp && i < min(len(run.gateways), MaxTransitSwitches); i++ {
		if err := ensureTransitSwitch(ctx, run.icnb, TransitSwitchName(i)); err != nil {
			setCondition(ic, kovnv1.ConditionReady, false, kovnv1.ReasonReconcileFailed, "transit switch: "+err.Error())
			return err
		}
	}
	return nil
}

// DegradedHold is how long Degraded stays True after kovn last put a row of this AZ back.
const DegradedHold = tamper.Hold

// guardRecord checks, once the cluster has joined under its AZ name, that IC-NB still holds its
// join record as the InterConnect's status remembers it, puts back what someone else changed
// (see restoreRecord) and reports it in Degraded, an event and a metric. It returns the join
// time to claim with: the recorded one, so a deleted record comes back with its precedence.
func (r *Reconciler) guardRecord(ctx context.Context, run *joinRun, owner string) (time.Time, error) {
	ic := run.ic
	joined, err := time.Parse(time.RFC3339Nano, ic.Status.JoinedAt)
	if ic.Status.AZName != ic.Spec.AZName || err != nil {
		r.noteTampering(ic, nil)
		return time.Now(), nil // not joined under this name yet (or renaming): nothing to guard
	}
	found, err := restoreRecord(ctx, run.icnb, ic.Spec.AZName, owner, ic.Status.JoinedAt)
	if err != nil {
		return joined, err
	}
	r.noteTampering(ic, found)
	return joined, nil
}

// noteTampering records a repair of the join record (found: what was put back) and sets
// Degraded from the latest repair of any of this AZ's rows (the MCS exports' too): True for
// DegradedHold after it, else False.
func (r *Reconciler) noteTampering(ic *kovnv1.InterConnect, found []string) {
	if len(found) > 0 {
		msg := "put back: " + strings.Join(found, "; ") + " (not by this cluster; OVN-IC's databases let any AZ's certificate write them)"
		r.Tamper.Note(len(found), msg)
		if r.Recorder != nil {
			r.Recorder.Event(ic, corev1.EventTypeWarning, kovnv1.ReasonRecordTampered, msg)
		}
	}
	if at, msg, ok := r.Tamper.Latest(time.Now()); ok {
		setCondition(ic, kovnv1.ConditionDegraded, true, kovnv1.ReasonRecordTampered,
			fmt.Sprintf("%s, at %s", msg, at.UTC().Format(time.RFC3339)))
		return
	}
	setCondition(ic, kovnv1.ConditionDegraded, false, kovnv1.ReasonRecordsIntact, "")
}

// certifiedNames are the AZ names the clusterset certificate in use acts for; nil when the
// IC databases are reached without one.
func (r *Reconciler) certifiedNames(ic *kovnv1.InterConnect) []string {
	if !ictls.NeedsTLS(&ic.Spec) || r.TLS == nil || r.TLS.Creds == nil {
		return nil
	}
	return r.TLS.Names()
}

// errAZNotCertified: the clusterset certificate (described by cert) acts for names, not for
// ic's azName, so the IC-SB relay would refuse the cluster's writes.
func errAZNotCertified(ic *kovnv1.InterConnect, cert string, names []string) error {
	az := ic.Spec.AZName
	return fmt.Errorf("certificate %s from Secret %s acts for AZ %s, not azName %s: the clusterset's IC-SB relay refuses "+
		"its writes as %s (issue one whose CN or a DNS name is %s; both names while renaming)",
		cert, ictls.SecretName(&ic.Spec), strings.Join(names, ", "), az, az, az)
}

// claimFailed sets Ready from an error of claiming the AZ name in IC-NB: AZNameTaken when another
// cluster holds it, else the failure.
func claimFailed(ic *kovnv1.InterConnect, err error) error {
	var taken *AZTakenError
	if errors.As(err, &taken) {
		// Retried with backoff: the name may be freed when the other cluster leaves.
		setCondition(ic, kovnv1.ConditionReady, false, kovnv1.ReasonAZNameTaken, err.Error())
		return err
	}
	setCondition(ic, kovnv1.ConditionReady, false, kovnv1.ReasonReconcileFailed, "recording the join in IC-NB: "+err.Error())
	return err
}

// readJoin reads the clusterset and the ForeignAZs and resolves the Input of For.
func (r *Reconciler) readJoin(ctx context.Context, run *joinRun) error {
	tss, err := transitSwitches(ctx, run.icnb)
	if err != nil {
		return err
	}
	if run.cs, err = readClusterset(ctx, run.icsb); err != nil {
		return err
	}
	run.cs = run.cs.withJoined(run.joined)
	if run.peerings, err = r.foreignPeerings(ctx, run.icnb, run.ic.Spec.AZName, run.cs); err != nil {
		return err
	}
	in, err := r.input(ctx, run.ic, run.spec, run.nodes, run.gateways, run.cs, run.renamedFrom)
	if err != nil {
		setCondition(run.ic, kovnv1.ConditionReady, false, kovnv1.ReasonReconcileFailed, err.Error())
		return err
	}
	in.TransitSwitches, in.ECMP = tss, run.ecmp
	in.Foreign = goodForeign(run.peerings)
	keyed := slices.Clone(tss)
	for _, f := range in.Foreign {
		keyed = append(keyed, f.TransitSwitch)
	}
	in.SwitchPortKeys = transitPortKeys(ctx, r.NB, in.AZ, keyed)
	in.Joined = run.joined
	in.WithdrawnBy = withdrawnBy(ctx, run.icnb, in.AZ)
	in.Declared = declarationsBy(ctx, run.icnb, subnetsKeyPrefix, in.AZ)
	run.in = in
	return nil
}

// goodForeign are the peerings that have a spec to program (a valid one, or the last valid).
func goodForeign(peerings []foreignPeering) []ForeignIn {
	var out []ForeignIn
	for _, p := range peerings {
		if p.good {
			out = append(out, p.in)
		}
	}
	return out
}

// gatewayHandshake publishes the transit keys to the gateway nodes once they are due and
// holds the gateways OVN just failed over from (run.in's Held).
func (r *Reconciler) gatewayHandshake(ctx context.Context, run *joinRun) error {
	var err error
	if run.keysDue, err = r.transitKeysDue(ctx, run.nodes, run.gateways, run.in.SwitchPortKeys); err != nil {
		return err
	}
	if run.keysDue {
		if err := r.publishTransitKeys(ctx, run.nodes, run.gateways, run.in.SwitchPortKeys); err != nil {
			return err
		}
	}
	if run.holding, err = r.updateHolds(ctx, run.ic, &run.in, run.cs, run.nodes); err != nil {
		setCondition(run.ic, kovnv1.ConditionReady, false, kovnv1.ReasonReconcileFailed, err.Error())
		return err
	}
	return nil
}

// writeDesired writes d to IC-NB, NB, IC-SB and NB again, in that order (see join). applyErr
// is the shard's (readiness reports it), foreignErr the peerings'; err stops the reconcile.
func (r *Reconciler) writeDesired(ctx context.Context, run *joinRun, d Desired) (applyErr, foreignErr, err error) {
	ic, in := run.ic, run.in
	if err := r.declareGuarded(ctx, run.icnb, withdrawnKeyPrefix, in.AZ, d.Withdraw, "withdrawn subnets"); err != nil {
		return nil, nil, err
	}
	if err := r.declareGuarded(ctx, run.icnb, subnetsKeyPrefix, in.AZ, d.Declare, "subnets"); err != nil {
		return nil, nil, err
	}
	if len(d.Unenforced) > 0 {
		setCondition(ic, kovnv1.ConditionSupported, false, "OVNLimitation", fmt.Sprintf(
			"OVN 23.03 cannot deny IPv6 %v without withdrawing this cluster's IPv6 subnets: kovn does not route to them, "+
				"but ovn-ic still exchanges them", prefixStrings(d.Unenforced)))
	}
	if err := applyNBGlobal(ctx, r.NB, in.AZ, d.Options); err != nil {
		setCondition(ic, kovnv1.ConditionReady, false, kovnv1.ReasonReconcileFailed, "NB_Global: "+err.Error())
		return nil, nil, err
	}
	_, applyErr = nbsync.Apply(ctx, r.NB, d.Shard)
	if run.renamedFrom != "" && applyErr == nil {
		// ovn-ic deletes the old AZ row on a rename only if it saw the old name and nothing
		// refers to the row; kovn removes it with its gateways, routes and transit ports in one
		// transaction, so the peers drop the old name's routes at once and learn the new ones.
		if err := removeAZ(ctx, run.icsb, run.renamedFrom); err != nil {
			setCondition(ic, kovnv1.ConditionReady, false, kovnv1.ReasonReconcileFailed, "removing the old AZ "+run.renamedFrom+" from IC-SB: "+err.Error())
			return applyErr, nil, err
		}
		if run.cs, err = readClusterset(ctx, run.icsb); err != nil {
			return applyErr, nil, err
		}
		run.cs = run.cs.withJoined(run.joined)
	}
	run.waiting, foreignErr = r.applyForeign(ctx, in, run.peerings, d, run.cs)
	return applyErr, foreignErr, nil
}

// requeue shortens res's requeue while a ForeignAZ waits for ovn-ic (1 s) or, when the
// reconcile succeeded, while a gateway is held (holdPoll).
func requeue(res ctrl.Result, err error, waiting, holding bool) ctrl.Result {
	if waiting && (res.RequeueAfter == 0 || res.RequeueAfter > time.Second) {
		res.RequeueAfter = time.Second
	}
	if holding && err == nil && (res.RequeueAfter == 0 || res.RequeueAfter > holdPoll) {
		res.RequeueAfter = holdPoll
	}
	return res
}
