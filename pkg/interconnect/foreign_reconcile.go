package interconnect

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	libovsdb "github.com/ovn-org/libovsdb/client"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kovnv1 "github.com/kovn/kovn/api/v1alpha1"
	"github.com/kovn/kovn/pkg/cluster/nbsync"
	"github.com/kovn/kovn/pkg/cluster/topology"
)

// +kubebuilder:rbac:groups=kovn.io,resources=foreignazs,verbs=get;list;watch
// +kubebuilder:rbac:groups=kovn.io,resources=foreignazs/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=kovn.io,resources=vpcs,verbs=get;list;watch

// foreignPeering is one ForeignAZ object and what the reconciler made of it.
type foreignPeering struct {
	obj *kovnv1.ForeignAZ
	in  ForeignIn
	// invalid is the spec's error; in is then the last good spec (programmed as it was), if any.
	invalid error
	good    bool // in holds a spec to program
}

// foreignPeerings lists the ForeignAZs and resolves each against the clusterset: the foreign
// AZ's routes on its transit switch, the Vpc's subnets, a link index. The transit switches
// are created in IC-NB when missing.
func (r *Reconciler) foreignPeerings(ctx context.Context, icnbc libovsdb.Client, localAZ string, cs clusterset) ([]foreignPeering, error) {
	var list kovnv1.ForeignAZList
	if err := r.List(ctx, &list); err != nil {
		return nil, err
	}
	slices.SortFunc(list.Items, func(a, b kovnv1.ForeignAZ) int { return strings.Compare(a.Name, b.Name) })
	links := linkAllocation{used: map[int]bool{}, taken: map[int]bool{}}
	for _, o := range list.Items {
		links.used[int(o.Status.LinkIndex)] = true
	}
	if r.foreignGood == nil {
		r.foreignGood = map[string]ForeignIn{}
	}
	var out []foreignPeering
	switches := map[string]string{} // transit switch -> the ForeignAZ using it
	for i := range list.Items {
		p := r.resolvePeering(ctx, icnbc, &list.Items[i], localAZ, cs, switches, links)
		links.taken[p.in.LinkIndex] = true
		out = append(out, p)
	}
	return out, nil
}

// linkAllocation is what the link indexes of a reconcile's peerings are chosen from: used are
// those any ForeignAZ's status names, taken those given to the peerings resolved so far.
type linkAllocation struct {
	used, taken map[int]bool
}

// resolvePeering resolves one ForeignAZ (see foreignPeerings); a spec that is invalid, or
// whose transit switch cannot be created, keeps the last good one. switches are the transit
// switches taken by the ForeignAZs resolved so far.
func (r *Reconciler) resolvePeering(ctx context.Context, icnbc libovsdb.Client, o *kovnv1.ForeignAZ, localAZ string, cs clusterset,
	switches map[string]string, links linkAllocation) foreignPeering {
	p := foreignPeering{obj: o}
	in, err := r.parseForeign(ctx, o, localAZ, switches)
	if err == nil {
		err = ensureTransitSwitch(ctx, icnbc, in.TransitSwitch)
	}
	if err != nil {
		p.invalid = err
		p.in, p.good = r.foreignGood[o.Name]
		p.in.Remote = cs.tsRoutes[p.in.TransitSwitch][p.in.AZ]
		return p
	}
	switches[in.TransitSwitch] = o.Name
	if in.LinkIndex = allocLinkIndex(links.used, links.taken, int(o.Status.LinkIndex)); in.LinkIndex == 0 {
		p.invalid = fmt.Errorf("no free link network: %d ForeignAZs use them", MaxForeignLinks)
		return p
	}
	in.Remote = cs.tsRoutes[in.TransitSwitch][in.AZ]
	p.in, p.good = in, true
	r.foreignGood[o.Name] = in
	return p
}

// allocLinkIndex keeps a ForeignAZ's current link index while it is in range and no peering
// resolved before it in this reconcile took it (two statuses can name one index, e.g. restored
// from a backup); else it takes the lowest index no ForeignAZ's status names and marks it
// used, so the next new ForeignAZ of the same reconcile gets another. 0: none is free.
func allocLinkIndex(used, taken map[int]bool, current int) int {
	if current >= 1 && current <= MaxForeignLinks && !taken[current] {
		return current
	}
	for j := 1; j <= MaxForeignLinks; j++ {
		if !used[j] {
			used[j] = true
			return j
		}
	}
	return 0
}

// parseForeign checks a ForeignAZ's spec against what CEL cannot see; switches are the transit
// switches earlier ForeignAZs (by name) took.
func (r *Reconciler) parseForeign(ctx context.Context, o *kovnv1.ForeignAZ, localAZ string, switches map[string]string) (ForeignIn, error) {
	s := o.Spec
	in := ForeignIn{Name: o.Name, AZ: s.AZ, TransitSwitch: s.TransitSwitch, VpcRouter: s.Vpc}
	switch {
	case s.AZ == localAZ:
		return in, fmt.Errorf("az: %s is this cluster's own AZ", s.AZ)
	case switches[s.TransitSwitch] != "":
		return in, fmt.Errorf("transitSwitch: %s is used by ForeignAZ %s", s.TransitSwitch, switches[s.TransitSwitch])
	}
	if _, kovn := transitSwitchIndex(s.TransitSwitch); kovn {
		return in, fmt.Errorf("transitSwitch: %s is one of kovn's own transit switches", s.TransitSwitch)
	}
	if in.VpcRouter == "" || in.VpcRouter == r.State.Opts.DefaultVpc {
		in.VpcRouter = r.State.Opts.DefaultVpc
	} else if err := r.Get(ctx, client.ObjectKey{Name: s.Vpc}, &kovnv1.Vpc{}); apierrors.IsNotFound(err) {
		return in, fmt.Errorf("vpc: no Vpc %s", s.Vpc)
	} else if err != nil {
		return in, err
	}
	for _, sn := range r.State.Subnets() {
		if sn.Vpc == in.VpcRouter {
			in.VpcCIDRs = append(in.VpcCIDRs, sn.CIDRs...)
		}
	}
	for _, a := range s.TransitAddresses {
		p, err := netip.ParsePrefix(a)
		if err != nil || p.Masked() == p || p.Bits() >= p.Addr().BitLen()-1 {
			return in, fmt.Errorf("transitAddresses: %q is not an address with its network's length (169.254.60.1/24)", a)
		}
		if slices.ContainsFunc(in.TransitAddrs, func(q netip.Prefix) bool { return q.Addr().Is4() == p.Addr().Is4() }) {
			return in, fmt.Errorf("transitAddresses: two addresses of one family")
		}
		in.TransitAddrs = append(in.TransitAddrs, p)
	}
	var err error
	if in.Advertise, err = parseCIDRs("advertiseCIDRs", s.AdvertiseCIDRs); err != nil {
		return in, err
	}
	in.Accept, err = parseCIDRs("acceptCIDRs", s.AcceptCIDRs)
	return in, err
}

// applyForeign programs each peering's shard, removes those of ForeignAZs gone, and writes
// every ForeignAZ's status. It returns whether one waits for ovn-ic.
func (r *Reconciler) applyForeign(ctx context.Context, in Input, peerings []foreignPeering, d Desired, cs clusterset) (waiting bool, err error) {
	byName := map[string]ForeignDesired{}
	for _, fd := range d.Foreign {
		byName[fd.Name] = fd
	}
	keep := map[string]bool{}
	var errs []error
	for _, p := range peerings {
		keep[p.obj.Name] = true
		fd, ok := byName[p.obj.Name]
		var applyErr error
		if ok {
			_, applyErr = nbsync.Apply(ctx, r.NB, fd.Shard)
			if r.peered == nil {
				r.peered = map[string]bool{}
			}
			r.peered[p.obj.Name] = true
		}
		w, err := r.foreignStatus(ctx, in, p, fd, cs, applyErr)
		waiting = waiting || w
		errs = append(errs, err)
		if !errors.Is(applyErr, nbsync.ErrParentMissing) {
			errs = append(errs, applyErr)
		}
	}
	for name := range r.peered {
		if !keep[name] {
			if _, err := nbsync.Apply(ctx, r.NB, topology.Shard{OwnerType: topology.OwnerForeignAZ, Owner: name}); err != nil {
				errs = append(errs, err)
				continue
			}
			delete(r.peered, name)
			delete(r.foreignGood, name)
		}
	}
	return waiting, errors.Join(errs...)
}

// removeForeign takes every peering out (the cluster leaves the clusterset).
func (r *Reconciler) removeForeign(ctx context.Context) error {
	var list kovnv1.ForeignAZList
	if err := r.List(ctx, &list); err != nil {
		return err
	}
	names := map[string]bool{}
	for n := range r.peered {
		names[n] = true
	}
	for i := range list.Items {
		names[list.Items[i].Name] = true
	}
	for n := range names {
		if _, err := nbsync.Apply(ctx, r.NB, topology.Shard{OwnerType: topology.OwnerForeignAZ, Owner: n}); err != nil {
			return err
		}
	}
	r.peered, r.foreignGood = nil, nil
	for i := range list.Items {
		o := &list.Items[i]
		before := o.DeepCopy()
		o.Status = kovnv1.ForeignAZStatus{ObservedGeneration: o.Generation, Conditions: o.Status.Conditions}
		setForeignCondition(o, kovnv1.ConditionReady, false, kovnv1.ReasonNotInterconnected, "this cluster has no InterConnect: nothing is peered")
		if err := r.patchForeignStatus(ctx, o, before); err != nil {
			return err
		}
	}
	return nil
}

// foreignStatus writes one ForeignAZ's status; waiting is true while ovn-ic has yet to make
// the transit switch or bind kovn's port on it.
func (r *Reconciler) foreignStatus(ctx context.Context, in Input, p foreignPeering, fd ForeignDesired, cs clusterset, applyErr error) (waiting bool, err error) {
	o := p.obj
	before := o.DeepCopy()
	o.Status.ObservedGeneration = o.Generation
	if p.invalid != nil {
		setForeignCondition(o, kovnv1.ConditionValidated, false, kovnv1.ReasonValidationFailed, p.invalid.Error())
		msg := "spec invalid: " + p.invalid.Error()
		if p.good {
			msg += "; the last valid spec stays programmed"
		}
		setForeignCondition(o, kovnv1.ConditionReady, false, kovnv1.ReasonValidationFailed, msg)
	} else {
		setForeignCondition(o, kovnv1.ConditionValidated, true, kovnv1.ReasonValid, "")
	}
	if p.good {
		o.Status.Router, o.Status.LinkIndex = ForeignRouterName(o.Name), int32(p.in.LinkIndex)
		o.Status.Advertised, o.Status.Learned, o.Status.Refused = prefixStrings(fd.Advertised), prefixStrings(fd.Learned), prefixStrings(fd.Refused)
		r.agreement(o, p.in, fd)
	}
	if p.invalid == nil {
		lsp := SwitchPortName(in.AZ, p.in.TransitSwitch)
		switch {
		case errors.Is(applyErr, nbsync.ErrParentMissing):
			waiting = true
			setForeignCondition(o, kovnv1.ConditionReady, false, kovnv1.ReasonWaitingForOVNIC,
				fmt.Sprintf("waiting for ovn-ic to create transit switch %s in this AZ (or for Vpc %s's router)", p.in.TransitSwitch, p.in.VpcRouter))
		case applyErr != nil:
			setForeignCondition(o, kovnv1.ConditionReady, false, kovnv1.ReasonReconcileFailed, applyErr.Error())
		case len(in.Gateways) == 0:
			setForeignCondition(o, kovnv1.ConditionReady, false, kovnv1.ReasonNoGateway, "the InterConnect has no gateway node")
		case cs.portGateway[lsp] == "":
			waiting = true
			setForeignCondition(o, kovnv1.ConditionReady, false, kovnv1.ReasonWaitingForOVNIC, "transit port "+lsp+" not bound to a gateway in OVN-IC yet")
		default:
			setForeignCondition(o, kovnv1.ConditionReady, true, kovnv1.ReasonReconciled, fmt.Sprintf(
				"peered with AZ %s on %s through gateway %s: %d prefix(es) advertised, %d learned", p.in.AZ, p.in.TransitSwitch,
				cs.portGateway[lsp], len(fd.Advertised), len(fd.Learned)))
		}
	}
	return waiting, r.patchForeignStatus(ctx, o, before)
}

// patchForeignStatus writes o's status when it differs from before's: the interconnect
// reconciles on every IC-SB change, and most leave a ForeignAZ's status as it was.
func (r *Reconciler) patchForeignStatus(ctx context.Context, o, before *kovnv1.ForeignAZ) error {
	if equality.Semantic.DeepEqual(o.Status, before.Status) {
		return nil
	}
	if err := r.Status().Patch(ctx, o, client.MergeFrom(before)); err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	return nil
}

// agreement sets RoutesAgreed: False, with an event when the message changes, while the
// foreign AZ advertises a prefix kovn refuses, an accepted CIDR has nothing advertised in it,
// or an agreed local prefix cannot be advertised.
func (r *Reconciler) agreement(o *kovnv1.ForeignAZ, in ForeignIn, fd ForeignDesired) {
	var msgs []string
	outside := slices.DeleteFunc(slices.Clone(fd.Refused), func(p netip.Prefix) bool { return slices.Contains(fd.Overlapping, p) })
	if len(outside) > 0 {
		msgs = append(msgs, fmt.Sprintf("AZ %s advertises %v outside acceptCIDRs: not routed to", in.AZ, prefixStrings(outside)))
	}
	if len(fd.Overlapping) > 0 {
		msgs = append(msgs, fmt.Sprintf("AZ %s advertises %v inside this Vpc's subnets: not routed to", in.AZ, prefixStrings(fd.Overlapping)))
	}
	if len(fd.IPv6Unblocked) > 0 {
		msgs = append(msgs, fmt.Sprintf("ovn-ic still learns %v onto the peering router, where nothing routes to it: OVN 23.03 cannot blacklist an IPv6 prefix no longer than this cluster's IPv6 subnets",
			prefixStrings(fd.IPv6Unblocked)))
	}
	if len(fd.Unblocked) > 0 {
		msgs = append(msgs, fmt.Sprintf("ovn-ic still learns %v onto the peering router, where nothing routes to it: blacklisting it would also withdraw or refuse this cluster's or the clusterset's own prefixes",
			prefixStrings(fd.Unblocked)))
	}
	if len(fd.Unadvertised) > 0 {
		msgs = append(msgs, fmt.Sprintf("accepted %v but AZ %s advertises nothing inside", prefixStrings(fd.Unadvertised), in.AZ))
	}
	if len(fd.NotAdvertised) > 0 {
		msgs = append(msgs, fmt.Sprintf("%v not advertised: the InterConnect refuses it (OVN's route filter is per AZ), or the transit network lacks its family",
			prefixStrings(fd.NotAdvertised)))
	}
	if len(msgs) == 0 {
		setForeignCondition(o, kovnv1.ConditionRoutesAgreed, true, kovnv1.ReasonAgreed, "")
		return
	}
	msg := strings.Join(msgs, "; ")
	if c := meta.FindStatusCondition(o.Status.Conditions, kovnv1.ConditionRoutesAgreed); (c == nil || c.Message != msg) && r.Recorder != nil {
		r.Recorder.Event(o, corev1.EventTypeWarning, kovnv1.ReasonRouteMismatch, msg)
	}
	setForeignCondition(o, kovnv1.ConditionRoutesAgreed, false, kovnv1.ReasonRouteMismatch, msg)
}

func setForeignCondition(o *kovnv1.ForeignAZ, t string, ok bool, reason, msg string) {
	kovnv1.SetCondition(&o.Status.Conditions, o.Generation, t, ok, reason, msg)
}
