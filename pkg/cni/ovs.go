package cni

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/ovn-org/libovsdb/client"
	"github.com/ovn-org/libovsdb/model"
	"github.com/ovn-org/libovsdb/ovsdb"

	"github.com/kovn/kovn/pkg/ovn"
	"github.com/kovn/kovn/pkg/ovn/model/vswitch"
)

// DefaultBridge is OVN's integration bridge.
const DefaultBridge = "br-int"

// Keys of the OVS Interface's external_ids.
const (
	// ExtIDIfaceID binds the interface to the OVN logical switch port of that name.
	ExtIDIfaceID = "iface-id"
	// ExtIDOVNInstalled is set to "true" by ovn-controller once the port's flows are in.
	ExtIDOVNInstalled = "ovn-installed"
	// ExtIDAttachedMAC is the pod interface's MAC (informational, as OpenStack does).
	ExtIDAttachedMAC = "attached-mac"
	// Who the port is for, for garbage collection on the node.
	ExtIDPodNamespace = "kovn.io/pod-namespace"
	ExtIDPodName      = "kovn.io/pod-name"
	ExtIDPodUID       = "kovn.io/pod-uid"
	ExtIDContainerID  = "kovn.io/container-id"
)

// PortAttacher connects node-side veths to the integration bridge.
type PortAttacher interface {
	// Attach makes hostIf a port of the bridge whose interface carries
	// external_ids:iface-id=ifaceID plus extIDs. Idempotent.
	Attach(ctx context.Context, hostIf, ifaceID string, extIDs map[string]string) error
	// WaitInstalled returns once OVN reports the port installed, or an error wrapping
	// ErrTryAgain that says what is missing.
	WaitInstalled(ctx context.Context, hostIf string) error
	// Detach removes hostIf's port and interface. Idempotent.
	Detach(ctx context.Context, hostIf string) error
	// Verify checks that hostIf is attached with iface-id ifaceID and installed.
	Verify(ctx context.Context, hostIf, ifaceID string) error
}

// OVSAttacher is the PortAttacher of a node: it writes the local Open_vSwitch database
// through libovsdb. It creates Port and Interface rows on an existing bridge and nothing
// else (the bridge belongs to the node bootstrap and ovn-controller).
type OVSAttacher struct {
	client client.Client
	bridge string
	// InstallTimeout bounds WaitInstalled within its context (default 60s).
	InstallTimeout time.Duration
	// PollInterval is how often WaitInstalled looks at the cache (default 50ms).
	PollInterval time.Duration
	// VswitchdTimeout bounds how long Detach waits for ovs-vswitchd (default 5s).
	VswitchdTimeout time.Duration
}

var _ PortAttacher = (*OVSAttacher)(nil)

// NewOVSAttacher returns an attacher for bridge (DefaultBridge when empty). c must be an
// Open_vSwitch client whose monitor covers Bridge, Port and Interface (ovn.ConnectOVS).
func NewOVSAttacher(c client.Client, bridge string) *OVSAttacher {
	if bridge == "" {
		bridge = DefaultBridge
	}
	return &OVSAttacher{
		client: c, bridge: bridge,
		InstallTimeout: 60 * time.Second, PollInterval: 50 * time.Millisecond, VswitchdTimeout: 5 * time.Second,
	}
}

// Attach implements PortAttacher in one transaction: the Interface (external_ids merged
// into what is there, unless that belonged to another iface-id), the Port, and the port's
// membership in the bridge (a port of that name on another bridge moves).
func (a *OVSAttacher) Attach(ctx context.Context, hostIf, ifaceID string, extIDs map[string]string) error {
	return a.attach(ctx, &vswitch.Interface{Name: hostIf}, ifaceID, extIDs)
}

// AttachInternal attaches an internal port, whose kernel device ovs-vswitchd creates itself,
// with a fixed MAC: the node's ovn0. Otherwise it is Attach.
func (a *OVSAttacher) AttachInternal(ctx context.Context, name, ifaceID, mac string) error {
	return a.attach(ctx, &vswitch.Interface{Name: name, Type: "internal", MAC: &mac}, ifaceID, nil)
}

// attach is Attach for the interface iface describes (name, and for internal ports type and MAC).
func (a *OVSAttacher) attach(ctx context.Context, iface *vswitch.Interface, ifaceID string, extIDs map[string]string) error {
	hostIf := iface.Name
	if hostIf == "" || ifaceID == "" {
		return fmt.Errorf("%w: attaching to OVS needs an interface name and an iface-id", ErrInvalidConfig)
	}
	br, err := ovn.Get(ctx, a.client, &vswitch.Bridge{Name: a.bridge})
	if errors.Is(err, ovn.ErrNotFound) {
		return fmt.Errorf("%w: OVS bridge %s does not exist on this node (the node bootstrap creates it)", ErrTryAgain, a.bridge)
	}
	if err != nil {
		return fmt.Errorf("looking up OVS bridge %s: %w", a.bridge, err)
	}
	ops, err := a.attachOps(ctx, br, iface, ifaceID, extIDs)
	if err != nil {
		return fmt.Errorf("attaching %s to OVS bridge %s: %w", hostIf, a.bridge, err)
	}
	if _, err := ovn.Transact(ctx, a.client, ops); err != nil {
		return fmt.Errorf("attaching %s to OVS bridge %s: %w", hostIf, a.bridge, err)
	}
	a.awaitCache(ctx, func() bool {
		_, err := a.attachment(ctx, hostIf, ifaceID)
		return err == nil
	})
	return nil
}

// attachOps builds Attach's operations.
func (a *OVSAttacher) attachOps(ctx context.Context, br *vswitch.Bridge, iface *vswitch.Interface, ifaceID string, extIDs map[string]string) ([]ovsdb.Operation, error) {
	hostIf := iface.Name
	var existing map[string]string
	cur, err := ovn.Get(ctx, a.client, &vswitch.Interface{Name: hostIf})
	switch {
	case err == nil:
		existing = cur.ExternalIDs
	case !errors.Is(err, ovn.ErrNotFound):
		return nil, err
	}
	iface.ExternalIDs = mergeIfaceIDs(existing, extIDs, ifaceID)
	fields := []interface{}{&iface.ExternalIDs}
	if iface.Type != "" { // internal ports: their type and MAC are part of what is wanted
		fields = append(fields, &iface.Type, &iface.MAC)
	}
	ops, err := ovn.CreateOrUpdateOps(ctx, a.client, nil, iface, fields...)
	if err != nil {
		return nil, err
	}
	port := &vswitch.Port{Name: hostIf, Interfaces: []string{iface.UUID}}
	if ops, err = ovn.CreateOrUpdateOps(ctx, a.client, ops, port, &port.Interfaces); err != nil {
		return nil, err
	}
	others, err := ovn.Find(ctx, a.client, func(b *vswitch.Bridge) bool {
		return b.UUID != br.UUID && slices.Contains(b.Ports, port.UUID)
	})
	if err != nil {
		return nil, err
	}
	for _, o := range others {
		if ops, err = ovn.MutateOps(a.client, ops, o, model.Mutation{
			Field: &o.Ports, Mutator: ovsdb.MutateOperationDelete, Value: []string{port.UUID},
		}); err != nil {
			return nil, err
		}
	}
	if ops, err = a.staleBindingOps(ctx, ops, hostIf, ifaceID); err != nil {
		return nil, err
	}
	if slices.Contains(br.Ports, port.UUID) {
		return ops, nil
	}
	return ovn.MutateOps(a.client, ops, br, model.Mutation{
		Field: &br.Ports, Mutator: ovsdb.MutateOperationInsert, Value: []string{port.UUID},
	})
}

// staleBindingOps appends the removal of every other interface claiming ifaceID, with its
// port. A logical switch port belongs to one pod at a time, so such an interface is left over
// from an earlier sandbox of the pod (a StatefulSet pod recreated under its name, a sandbox
// whose DEL has not come yet). Left in place, ovn-controller sees two bindings for one port,
// recomputes, and may keep the stale one: the new pod's traffic is lost.
func (a *OVSAttacher) staleBindingOps(ctx context.Context, ops []ovsdb.Operation, hostIf, ifaceID string) ([]ovsdb.Operation, error) {
	stale, err := ovn.Find(ctx, a.client, func(i *vswitch.Interface) bool {
		return i.Name != hostIf && i.ExternalIDs[ExtIDIfaceID] == ifaceID
	})
	if err != nil {
		return nil, err
	}
	for _, i := range stale {
		more, err := a.detachOps(ctx, i.Name)
		if err != nil {
			return nil, err
		}
		ops = append(ops, more...)
	}
	return ops, nil
}

// mergeIfaceIDs is the interface's new external_ids: the existing ones when they are for
// the same iface-id (so ovn-controller's ovn-installed survives a repeated Attach), then
// extIDs (empty values dropped), then iface-id.
func mergeIfaceIDs(existing, extIDs map[string]string, ifaceID string) map[string]string {
	ids := map[string]string{}
	if existing[ExtIDIfaceID] == ifaceID {
		maps.Copy(ids, existing)
	}
	for k, v := range extIDs {
		if v != "" {
			ids[k] = v
		}
	}
	ids[ExtIDIfaceID] = ifaceID
	return ids
}

// WaitInstalled implements PortAttacher by watching the monitor cache for
// external_ids:ovn-installed="true" on hostIf's interface (set by ovn-controller >= 21.03).
func (a *OVSAttacher) WaitInstalled(ctx context.Context, hostIf string) error {
	timeout := a.InstallTimeout
	if timeout <= 0 {
		timeout = 60 * time.Second
	}
	waitCtx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	ticker := time.NewTicker(a.pollInterval())
	defer ticker.Stop()
	start := time.Now()
	for {
		iface, err := ovn.Get(context.Background(), a.client, &vswitch.Interface{Name: hostIf})
		if err == nil && iface.ExternalIDs[ExtIDOVNInstalled] == "true" {
			return nil
		}
		select {
		case <-waitCtx.Done():
			port := "?"
			if err == nil {
				port = iface.ExternalIDs[ExtIDIfaceID]
			}
			return fmt.Errorf("%w: OVN did not install port %q (OVS interface %s on %s) within %s: %s; "+
				"ovn-controller sets external_ids:%s=true once the logical switch port is bound to this chassis "+
				"and its flows are in: is ovn-controller running on this node, and does the logical switch port exist? (%w)",
				ErrTryAgain, port, hostIf, a.bridge, time.Since(start).Round(time.Millisecond),
				ifaceState(iface, err), ExtIDOVNInstalled, waitCtx.Err())
		case <-ticker.C:
		}
	}
}

// ifaceState says why an interface is not installed yet, for WaitInstalled's error.
func ifaceState(iface *vswitch.Interface, err error) string {
	switch {
	case errors.Is(err, ovn.ErrNotFound):
		return "the interface is not in the Open_vSwitch database"
	case err != nil:
		return "reading the interface failed: " + err.Error()
	case iface.Error != nil && *iface.Error != "":
		return "ovs-vswitchd reports: " + *iface.Error
	case iface.Ofport == nil || *iface.Ofport < 0:
		return "ovs-vswitchd has not given it an OpenFlow port"
	default:
		return fmt.Sprintf("it has OpenFlow port %d but no %s=true", *iface.Ofport, ExtIDOVNInstalled)
	}
}

// Detach implements PortAttacher: the port named hostIf leaves every bridge listing it and
// is deleted with its interfaces, in one transaction. (Interfaces exist only inside ports:
// OVSDB garbage-collects an interface no port references.)
//
// When it deleted something, Detach returns once ovs-vswitchd has applied the change
// (Open_vSwitch cur_cfg reaching the next_cfg it bumped, as ovs-vsctl waits), or after
// VswitchdTimeout if vswitchd does not answer: the userspace datapath keeps reading from
// the old veth until then, so a veth recreated under the same name and attached again
// before it would never pass traffic.
func (a *OVSAttacher) Detach(ctx context.Context, hostIf string) error {
	ops, err := a.detachOps(ctx, hostIf)
	if err != nil {
		return fmt.Errorf("detaching %s from OVS: %w", hostIf, err)
	}
	if len(ops) == 0 {
		return nil
	}
	ops, bumped, err := ovn.BumpNextCfgOps(ctx, a.client, ops)
	if err != nil {
		return fmt.Errorf("detaching %s from OVS: %w", hostIf, err)
	}
	results, err := ovn.Transact(ctx, a.client, ops)
	if err != nil {
		return fmt.Errorf("detaching %s from OVS: %w", hostIf, err)
	}
	a.awaitCache(ctx, func() bool {
		ops, err := a.detachOps(ctx, hostIf)
		return err == nil && len(ops) == 0
	})
	if bumped {
		timeout := a.VswitchdTimeout
		if timeout <= 0 {
			timeout = 5 * time.Second
		}
		// A vswitchd that does not answer is not Detach's failure: the port is gone from the
		// database, and vswitchd applies it when it comes back.
		_ = ovn.AwaitCurCfg(ctx, a.client, results[len(results)-1], timeout)
	}
	return nil
}

// detachOps builds Detach's operations; none when the port is gone.
func (a *OVSAttacher) detachOps(ctx context.Context, hostIf string) ([]ovsdb.Operation, error) {
	port, err := ovn.Get(ctx, a.client, &vswitch.Port{Name: hostIf})
	if errors.Is(err, ovn.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	bridges, err := ovn.Find(ctx, a.client, func(b *vswitch.Bridge) bool { return slices.Contains(b.Ports, port.UUID) })
	if err != nil {
		return nil, err
	}
	var ops []ovsdb.Operation
	for _, b := range bridges {
		if ops, err = ovn.MutateOps(a.client, ops, b, model.Mutation{
			Field: &b.Ports, Mutator: ovsdb.MutateOperationDelete, Value: []string{port.UUID},
		}); err != nil {
			return nil, err
		}
	}
	if ops, err = ovn.DeleteOps(ctx, a.client, ops, port); err != nil {
		return nil, err
	}
	for _, u := range port.Interfaces {
		if ops, err = ovn.DeleteOps(ctx, a.client, ops, &vswitch.Interface{UUID: u}); err != nil {
			return nil, err
		}
	}
	return ops, nil
}

// Verify implements PortAttacher.
func (a *OVSAttacher) Verify(ctx context.Context, hostIf, ifaceID string) error {
	iface, err := a.attachment(ctx, hostIf, ifaceID)
	if err != nil {
		return err
	}
	if iface.Error != nil && *iface.Error != "" {
		return fmt.Errorf("OVS interface %s: ovs-vswitchd reports: %s", hostIf, *iface.Error)
	}
	if iface.ExternalIDs[ExtIDOVNInstalled] != "true" {
		return fmt.Errorf("OVS interface %s is attached but OVN has not installed port %s", hostIf, ifaceID)
	}
	return nil
}

// attachment returns hostIf's interface if it is on the bridge (interface in a port of
// its name, port in the bridge) with iface-id ifaceID.
func (a *OVSAttacher) attachment(ctx context.Context, hostIf, ifaceID string) (*vswitch.Interface, error) {
	iface, err := ovn.Get(ctx, a.client, &vswitch.Interface{Name: hostIf})
	if err != nil {
		return nil, fmt.Errorf("OVS interface %s: %w", hostIf, err)
	}
	port, err := ovn.Get(ctx, a.client, &vswitch.Port{Name: hostIf})
	if err != nil || !slices.Contains(port.Interfaces, iface.UUID) {
		return nil, fmt.Errorf("OVS interface %s has no port of its name", hostIf)
	}
	br, err := ovn.Get(ctx, a.client, &vswitch.Bridge{Name: a.bridge})
	if err != nil || !slices.Contains(br.Ports, port.UUID) {
		return nil, fmt.Errorf("OVS port %s is not on bridge %s", hostIf, a.bridge)
	}
	if got := iface.ExternalIDs[ExtIDIfaceID]; got != ifaceID {
		return nil, fmt.Errorf("OVS interface %s has iface-id %q, want %q", hostIf, got, ifaceID)
	}
	return iface, nil
}

// awaitCache waits briefly until cond holds: the monitor cache lags a committed
// transaction by a moment, and the next call must see its own writes.
func (a *OVSAttacher) awaitCache(ctx context.Context, cond func() bool) {
	deadline := time.Now().Add(2 * time.Second)
	for !cond() && time.Now().Before(deadline) && ctx.Err() == nil {
		time.Sleep(5 * time.Millisecond)
	}
}

func (a *OVSAttacher) pollInterval() time.Duration {
	if a.PollInterval <= 0 {
		return 50 * time.Millisecond
	}
	return a.PollInterval
}
