package mirror

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"

	libovsdb "github.com/ovn-org/libovsdb/client"
	"github.com/ovn-org/libovsdb/model"
	"github.com/ovn-org/libovsdb/ovsdb"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/kovn/kovn/pkg/annotation"
	"github.com/kovn/kovn/pkg/cni"
	"github.com/kovn/kovn/pkg/contract"
	"github.com/kovn/kovn/pkg/ovn"
	"github.com/kovn/kovn/pkg/ovn/model/vswitch"
)

// Traffic mirroring: OVS Mirror rows on the integration bridge copy the selected pods'
// traffic, both directions (received from and sent to each pod's port), to mirror0, an
// internal port of the node for tcpdump and its like, and optionally to a remote collector
// over GRE or ERSPAN. A Mirror only copies: OVN's flows forward every packet as before. With
// no pod selected no Mirror row exists.

// Annotation set to "true" on a pod mirrors its traffic (with Annotated on its node, for a
// namespace the admin allows, or All).
const Annotation = annotation.Prefix + "mirror"

// Port is the node's mirror interface.
const Port = "mirror0"

// Mode is a node's mirroring switch (kovn-daemon --mirror).
type Mode string

const (
	Off       Mode = "off"       // no mirror0, no Mirror rows, annotations ignored
	Annotated Mode = "annotated" // the pods annotated ovn.kovn.io/mirror=true, of the Namespaces allowed
	All       Mode = "all"       // every pod of the node
)

// ParseMode reads a --mirror value.
func ParseMode(s string) (Mode, error) {
	switch m := Mode(s); m {
	case Off, Annotated, All:
		return m, nil
	}
	return "", fmt.Errorf("mirror mode %q: want off, annotated or all", s)
}

// mirrorKey marks the rows the mirror reconciler owns (external_ids), valued with their role.
const mirrorKey = "kovn.io/mirror"

// Names of the rows: the local Mirror and the remote one with its tunnel port.
const (
	localMirror  = "kovn-mirror0"
	remoteMirror = "kovn-mirror-remote"
	remotePort   = "kovn-mirror-rem"
)

// Remote is a collector the mirrored traffic is also sent to, encapsulated.
type Remote struct {
	Type   string // gre | erspan
	Remote netip.Addr
	Key    int // GRE key, or the ERSPAN session index (erspan_idx)
}

// ParseRemote reads "gre:IP[:KEY]" or "erspan:IP[:INDEX]" ("": none).
func ParseRemote(s string) (*Remote, error) {
	if s == "" {
		return nil, nil
	}
	typ, rest, ok := strings.Cut(s, ":")
	if !ok || (typ != "gre" && typ != "erspan") {
		return nil, fmt.Errorf("mirror remote %q: want gre:IP[:KEY] or erspan:IP[:INDEX]", s)
	}
	r := &Remote{Type: typ, Key: 1}
	ip, key := rest, ""
	switch {
	case strings.HasPrefix(rest, "["): // [IPv6] or [IPv6]:KEY
		end := strings.Index(rest, "]")
		if end < 0 {
			return nil, fmt.Errorf("mirror remote %q: unclosed [", s)
		}
		ip, key = rest[1:end], strings.TrimPrefix(rest[end+1:], ":")
	case strings.Count(rest, ":") == 1: // IPv4:KEY
		ip, key, _ = strings.Cut(rest, ":")
	}
	if key != "" {
		k, err := strconv.Atoi(key)
		if err != nil || k < 0 {
			return nil, fmt.Errorf("mirror remote %q: key %q is no number", s, key)
		}
		r.Key = k
	}
	a, err := netip.ParseAddr(ip)
	if err != nil {
		return nil, fmt.Errorf("mirror remote %q: %q is no IP address", s, ip)
	}
	r.Remote = a
	return r, nil
}

// Reconciler keeps the node's mirrors equal to what its mode and its pods select.
type Reconciler struct {
	client.Client // the daemon's cache: this node's pods
	OVS           libovsdb.Client
	Bridge        string
	Mode          Mode
	// Namespaces whose pods the annotation may select in Annotated mode ("*": any). A pod's
	// annotation is its namespace user's to write; the collector and mirror0 are the admin's,
	// so which namespaces may send their traffic there is the admin's (--mirror-namespaces).
	Namespaces []string
	Remote     *Remote
	// LinkUp brings mirror0's device up once ovs-vswitchd made it (nil: netlink); it reports
	// whether the device exists yet.
	LinkUp func(name string) (bool, error)
}

// Reconcile implements reconcile.Reconciler: one key, everything recomputed.
func (r *Reconciler) Reconcile(ctx context.Context, _ ctrl.Request) (ctrl.Result, error) {
	br, err := ovn.Get(ctx, r.OVS, &vswitch.Bridge{Name: r.Bridge})
	if errors.Is(err, ovn.ErrNotFound) {
		return ctrl.Result{RequeueAfter: time.Second}, nil // the node bootstrap makes it
	}
	if err != nil {
		return ctrl.Result{}, err
	}
	ports, waiting, err := r.selectedPorts(ctx)
	if err != nil {
		return ctrl.Result{}, err
	}
	ops, err := r.portOps(ctx, br)
	if err != nil {
		return ctrl.Result{}, err
	}
	if len(ops) > 0 { // the output ports first: the Mirror rows reference them
		if _, err := ovn.Transact(ctx, r.OVS, ops); err != nil {
			return ctrl.Result{}, fmt.Errorf("mirror ports: %w", err)
		}
		return ctrl.Result{RequeueAfter: 200 * time.Millisecond}, nil
	}
	if r.Mode != Off {
		up := r.LinkUp
		if up == nil {
			up = bringUp
		}
		if ok, err := up(Port); err != nil || !ok {
			return ctrl.Result{RequeueAfter: time.Second}, err
		}
	}
	if ops, err = r.mirrorOps(ctx, br, ports); err != nil {
		return ctrl.Result{}, err
	}
	if len(ops) > 0 {
		if _, err := ovn.Transact(ctx, r.OVS, ops); err != nil {
			return ctrl.Result{}, fmt.Errorf("mirrors: %w", err)
		}
	}
	if waiting {
		return ctrl.Result{RequeueAfter: 2 * time.Second}, nil // a selected pod's port is not plumbed yet
	}
	return ctrl.Result{}, nil
}

// selectedPorts are the UUIDs of the selected pods' OVS ports, sorted; waiting says a
// selected running pod has no port yet.
func (r *Reconciler) selectedPorts(ctx context.Context) ([]string, bool, error) {
	if r.Mode == Off {
		return nil, false, nil
	}
	var pods corev1.PodList
	if err := r.List(ctx, &pods); err != nil {
		return nil, false, err
	}
	want := map[string]bool{} // iface-ids
	for _, p := range pods.Items {
		if p.Spec.HostNetwork || p.DeletionTimestamp != nil || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		if r.Mode == All || p.Annotations[Annotation] == "true" && r.mayMirror(p.Namespace) {
			want[contract.PodPortName(p.Namespace, p.Name)] = true
		}
	}
	if len(want) == 0 { // the usual case in annotated mode: no scan of the node's interfaces
		return nil, false, nil
	}
	ifaces, err := ovn.Find(ctx, r.OVS, func(i *vswitch.Interface) bool { return want[i.ExternalIDs[cni.ExtIDIfaceID]] })
	if err != nil {
		return nil, false, err
	}
	byIface := map[string]string{}
	for _, i := range ifaces {
		byIface[i.UUID] = i.ExternalIDs[cni.ExtIDIfaceID]
	}
	found := map[string]bool{}
	portRows, err := ovn.Find(ctx, r.OVS, func(p *vswitch.Port) bool {
		return slices.ContainsFunc(p.Interfaces, func(i string) bool { return byIface[i] != "" })
	})
	if err != nil {
		return nil, false, err
	}
	var out []string
	for _, p := range portRows {
		out = append(out, p.UUID)
		for _, i := range p.Interfaces {
			found[byIface[i]] = true
		}
	}
	slices.Sort(out)
	return out, len(found) < len(want), nil
}

// portOps creates mirror0 (and the remote tunnel port) when the mode wants them and removes
// them when it does not; nothing when they are as wanted.
func (r *Reconciler) portOps(ctx context.Context, br *vswitch.Bridge) ([]ovsdb.Operation, error) {
	var ops []ovsdb.Operation
	var err error
	local := &vswitch.Interface{Name: Port, Type: "internal", ExternalIDs: map[string]string{mirrorKey: "output"}}
	if ops, err = r.ensurePort(ctx, ops, br, local, r.Mode != Off); err != nil {
		return nil, err
	}
	remote := &vswitch.Interface{Name: remotePort, ExternalIDs: map[string]string{mirrorKey: "remote"}}
	if r.Remote != nil {
		remote.Type = r.Remote.Type
		remote.Options = map[string]string{"remote_ip": r.Remote.Remote.String()}
		if r.Remote.Type == "gre" {
			remote.Options["key"] = strconv.Itoa(r.Remote.Key)
		} else {
			remote.Options["erspan_ver"], remote.Options["erspan_idx"] = "1", strconv.Itoa(r.Remote.Key)
		}
	}
	return r.ensurePort(ctx, ops, br, remote, r.Mode != Off && r.Remote != nil)
}

// ensurePort makes iface's port exist on br as written, or be gone.
func (r *Reconciler) ensurePort(ctx context.Context, ops []ovsdb.Operation, br *vswitch.Bridge, want *vswitch.Interface, present bool) ([]ovsdb.Operation, error) {
	cur, err := ovn.Get(ctx, r.OVS, &vswitch.Interface{Name: want.Name})
	if err != nil && !errors.Is(err, ovn.ErrNotFound) {
		return nil, err
	}
	port, perr := ovn.Get(ctx, r.OVS, &vswitch.Port{Name: want.Name})
	if perr != nil && !errors.Is(perr, ovn.ErrNotFound) {
		return nil, perr
	}
	if !present {
		if port == nil || !slices.Contains(br.Ports, port.UUID) {
			return ops, nil
		}
		return ovn.MutateOps(r.OVS, ops, br, model.Mutation{Field: &br.Ports, Mutator: ovsdb.MutateOperationDelete, Value: []string{port.UUID}})
	}
	if cur != nil && port != nil && slices.Contains(br.Ports, port.UUID) && cur.Type == want.Type &&
		maps.Equal(cur.Options, want.Options) && cur.ExternalIDs[mirrorKey] == want.ExternalIDs[mirrorKey] {
		return ops, nil
	}
	if ops, err = ovn.CreateOrUpdateOps(ctx, r.OVS, ops, want, &want.Type, &want.Options, &want.ExternalIDs); err != nil {
		return nil, err
	}
	p := &vswitch.Port{Name: want.Name, Interfaces: []string{want.UUID}}
	if ops, err = ovn.CreateOrUpdateOps(ctx, r.OVS, ops, p, &p.Interfaces); err != nil {
		return nil, err
	}
	if port != nil && slices.Contains(br.Ports, port.UUID) {
		return ops, nil
	}
	return ovn.MutateOps(r.OVS, ops, br, model.Mutation{Field: &br.Ports, Mutator: ovsdb.MutateOperationInsert, Value: []string{p.UUID}})
}

// mirrorOps makes the Mirror rows select ports (both directions) with their output ports, or
// drops them from br (the server deletes a Mirror no bridge lists) when no port is selected.
func (r *Reconciler) mirrorOps(ctx context.Context, br *vswitch.Bridge, ports []string) ([]ovsdb.Operation, error) {
	outputs := map[string]string{localMirror: Port}
	if r.Remote != nil {
		outputs[remoteMirror] = remotePort
	}
	cur, err := ovn.Find(ctx, r.OVS, func(m *vswitch.Mirror) bool { return m.ExternalIDs[mirrorKey] != "" })
	if err != nil {
		return nil, err
	}
	var ops []ovsdb.Operation
	have := map[string]*vswitch.Mirror{}
	for _, m := range cur {
		if _, wanted := outputs[m.Name]; wanted && len(ports) > 0 && have[m.Name] == nil && slices.Contains(br.Mirrors, m.UUID) {
			have[m.Name] = m
			continue
		}
		if ops, err = ovn.MutateOps(r.OVS, ops, br, model.Mutation{Field: &br.Mirrors, Mutator: ovsdb.MutateOperationDelete, Value: []string{m.UUID}}); err != nil {
			return nil, err
		}
	}
	if len(ports) == 0 {
		return ops, nil
	}
	for name, out := range outputs {
		outPort, err := ovn.Get(ctx, r.OVS, &vswitch.Port{Name: out})
		if err != nil {
			return nil, fmt.Errorf("mirror output port %s: %w", out, err)
		}
		want := &vswitch.Mirror{Name: name, SelectSrcPort: ports, SelectDstPort: ports, OutputPort: &outPort.UUID,
			ExternalIDs: map[string]string{mirrorKey: "mirror"}}
		if m := have[name]; m != nil {
			if slices.Equal(slices.Sorted(slices.Values(m.SelectSrcPort)), ports) && slices.Equal(slices.Sorted(slices.Values(m.SelectDstPort)), ports) && m.OutputPort != nil && *m.OutputPort == outPort.UUID {
				continue
			}
			want.UUID = m.UUID
			update, err := r.OVS.Where(want).Update(want, &want.SelectSrcPort, &want.SelectDstPort, &want.OutputPort)
			if err != nil {
				return nil, err
			}
			ops = append(ops, update...)
			continue
		}
		want.UUID = ovn.NewNamedUUID()
		insert, err := r.OVS.Create(want)
		if err != nil {
			return nil, err
		}
		ops = append(ops, insert...)
		if ops, err = ovn.MutateOps(r.OVS, ops, br, model.Mutation{Field: &br.Mirrors, Mutator: ovsdb.MutateOperationInsert, Value: []string{want.UUID}}); err != nil {
			return nil, err
		}
	}
	return ops, nil
}

func (r *Reconciler) mayMirror(ns string) bool {
	return slices.Contains(r.Namespaces, "*") || slices.Contains(r.Namespaces, ns)
}

// SetupWithManager: any event of this node's pods queues the one key.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	one := handler.EnqueueRequestsFromMapFunc(func(context.Context, client.Object) []reconcile.Request {
		return []reconcile.Request{{NamespacedName: types.NamespacedName{Name: "mirrors"}}}
	})
	// One event at start: mirror0 is made (or, mode off, what an earlier run left removed)
	// before any pod event.
	start := make(chan event.GenericEvent, 1)
	start <- event.GenericEvent{Object: &corev1.Pod{}}
	return ctrl.NewControllerManagedBy(mgr).Named("mirrors").Watches(&corev1.Pod{}, one).
		WatchesRawSource(source.Channel(start, one)).Complete(r)
}
