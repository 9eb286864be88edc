package underlay

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	libovsdb "github.com/ovn-org/libovsdb/client"
	"github.com/ovn-org/libovsdb/model"
	"github.com/ovn-org/libovsdb/ovsdb"

	kovnv1 "github.com/kovn/kovn/api/v1alpha1"
	"github.com/kovn/kovn/pkg/ovn"
	"github.com/kovn/kovn/pkg/ovn/model/vswitch"
)

// Ownership of provider bridges in the node's Open_vSwitch database.
const (
	// OwnerType marks the bridges this package made (ovn.OwnerTypeKey); the owner is the
	// provider network's name.
	OwnerType = "ProviderNetwork"
	// NICKey names the NIC moved into the bridge; NICConfigKey holds its NICConfig.
	NICKey       = "kovn.io/nic"
	NICConfigKey = "kovn.io/nic-config"
)

// Bridge is a provider bridge as the Open_vSwitch database records it.
type Bridge struct {
	Provider, Name, NIC string
	Config              NICConfig
	HasNICPort          bool
}

// Bridges lists the provider bridges kovn made on this node, whatever their provider.
func Bridges(ctx context.Context, c libovsdb.Client) ([]Bridge, error) {
	rows, err := ovn.Find(ctx, c, ovn.OwnedBy[*vswitch.Bridge](OwnerType, ""))
	if err != nil {
		return nil, err
	}
	var out []Bridge
	for _, br := range rows {
		cfg, err := DecodeNICConfig(br.ExternalIDs[NICConfigKey])
		if err != nil {
			return nil, fmt.Errorf("bridge %s: unreadable %s: %w", br.Name, NICConfigKey, err)
		}
		b := Bridge{Provider: br.ExternalIDs[ovn.OwnerKey], Name: br.Name, NIC: br.ExternalIDs[NICKey], Config: cfg}
		for _, p := range br.Ports {
			if port, err := ovn.Get(ctx, c, &vswitch.Port{UUID: p}); err == nil && port.Name == b.NIC {
				b.HasNICPort = true
			}
		}
		out = append(out, b)
	}
	return out, nil
}

// CreateBridge makes br-<provider> with its internal port and the NIC as a port, in one
// transaction that also records what the NIC carried. mac is the NIC's MAC: the bridge's own
// interface takes it, so neighbours that know the node's address on this network keep a valid
// entry when the address moves. datapathType is br-int's ("netdev" for userspace OVS).
func CreateBridge(ctx context.Context, c libovsdb.Client, provider, nic, mac, datapathType string, cfg NICConfig) error {
	name := kovnv1.BridgeName(provider)
	var ops []ovsdb.Operation
	add := func(m model.Model, uuid *string) error {
		*uuid = ovn.NewNamedUUID()
		o, err := c.Create(m)
		ops = append(ops, o...)
		return err
	}
	internal := &vswitch.Interface{Name: name, Type: "internal"}
	nicIface := &vswitch.Interface{Name: nic}
	if err := errors.Join(add(internal, &internal.UUID), add(nicIface, &nicIface.UUID)); err != nil {
		return err
	}
	internalPort := &vswitch.Port{Name: name, Interfaces: []string{internal.UUID}}
	nicPort := &vswitch.Port{Name: nic, Interfaces: []string{nicIface.UUID}}
	if err := errors.Join(add(internalPort, &internalPort.UUID), add(nicPort, &nicPort.UUID)); err != nil {
		return err
	}
	br := &vswitch.Bridge{Name: name, DatapathType: datapathType, Ports: []string{internalPort.UUID, nicPort.UUID},
		OtherConfig: map[string]string{"hwaddr": mac},
		ExternalIDs: ovn.OwnerIDs(OwnerType, provider, map[string]string{NICKey: nic, NICConfigKey: cfg.Encode()})}
	if err := add(br, &br.UUID); err != nil {
		return err
	}
	root, err := ovn.OpenVSwitchRoot(ctx, c)
	if err != nil {
		return err
	}
	mut, err := c.Where(root).Mutate(root, model.Mutation{Field: &root.Bridges, Mutator: ovsdb.MutateOperationInsert, Value: []string{br.UUID}})
	if err != nil {
		return err
	}
	_, err = ovn.Transact(ctx, c, append(ops, mut...))
	return err
}

// DeleteBridge removes a bridge, a provider bridge or any other (its ports and interfaces go
// with it: a provider bridge's NIC leaves OVS). Idempotent.
func DeleteBridge(ctx context.Context, c libovsdb.Client, name string) error {
	br, err := ovn.Get(ctx, c, &vswitch.Bridge{Name: name})
	if errors.Is(err, ovn.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	root, err := ovn.OpenVSwitchRoot(ctx, c)
	if err != nil {
		return err
	}
	ops, err := c.Where(root).Mutate(root, model.Mutation{Field: &root.Bridges, Mutator: ovsdb.MutateOperationDelete, Value: []string{br.UUID}})
	if err != nil {
		return err
	}
	del, err := c.Where(br).Delete()
	if err != nil {
		return err
	}
	_, err = ovn.Transact(ctx, c, append(ops, del...))
	return err
}

// SetMappings makes ovn-bridge-mappings map exactly want among kovn's providers (owned are
// the providers kovn has bridges for, some perhaps no longer wanted), keeping other tools'
// entries. One mutation of that key: the chassis identity's keys are left alone.
func SetMappings(ctx context.Context, c libovsdb.Client, want []Want, owned []string) error {
	root, err := ovn.OpenVSwitchRoot(ctx, c)
	if err != nil {
		return err
	}
	cur := root.ExternalIDs[BridgeMappingsKey]
	next := MergeMappings(cur, want, owned)
	if next == cur {
		return nil
	}
	wantIDs, drop := map[string]string{BridgeMappingsKey: next}, []string(nil)
	if next == "" {
		wantIDs, drop = nil, []string{BridgeMappingsKey}
	}
	muts := ovn.MapMutations(&root.ExternalIDs, root.ExternalIDs, wantIDs, drop)
	ops, err := c.Where(root).Mutate(root, muts...)
	if err != nil {
		return err
	}
	_, err = ovn.Transact(ctx, c, ops)
	return err
}

// DatapathType is br-int's datapath type, which provider bridges must share: patch ports
// between bridges only work within one datapath.
func DatapathType(ctx context.Context, c libovsdb.Client, integration string) (string, error) {
	br, err := ovn.Get(ctx, c, &vswitch.Bridge{Name: integration})
	if err != nil {
		return "", fmt.Errorf("integration bridge %s: %w", integration, err)
	}
	return br.DatapathType, nil
}

// owners lists the providers of bridges, for SetMappings.
func owners(bs []Bridge) []string {
	out := make([]string, 0, len(bs))
	for _, b := range bs {
		if !slices.Contains(out, b.Provider) {
			out = append(out, b.Provider)
		}
	}
	return out
}

// VswitchdTimeout bounds the waits for ovs-vswitchd (ovn.AwaitVswitchd) around a bridge.
var VswitchdTimeout = 5 * time.Second
