// Package peerprobe runs, on an interconnect gateway, a BFD session toward every gateway of
// the other clusters of the set and reports which clusters it cannot reach.
//
// OVN-IC learns where another cluster's gateways are through IC-SB; nothing in OVN tells a
// cluster that every gateway of another one is cut off, least of all while IC-SB is down, and
// its load balancers would keep sending that cluster's share of the traffic into the void.
// OVN's own BFD cannot help: ovn-controller runs BFD only on the tunnels to chassis of its HA
// groups and turns it off on every other tunnel of br-int, and OVN 23.03's logical BFD
// (NB table BFD) never leaves the chassis toward a transit switch's remote port. So the
// probes get tunnels of their own: Geneve on UDP port 6082 (OVN's stay on 6081), on a bridge
// of their own (Bridge), each with OVS's BFD. The node's daemon sets them up from the
// addresses kovn-controller annotates the node with, and annotates the node with the clusters
// whose every session is down (after one was up); kovn-controller then leaves those clusters'
// imported endpoints out of its load balancers.
package peerprobe

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"maps"
	"net/netip"
	"strconv"

	libovsdb "github.com/ovn-org/libovsdb/client"
	"github.com/ovn-org/libovsdb/model"
	"github.com/ovn-org/libovsdb/ovsdb"

	"github.com/kovn/kovn/pkg/ovn"
	"github.com/kovn/kovn/pkg/ovn/model/vswitch"
	"github.com/kovn/kovn/pkg/underlay"
)

const (
	// Bridge holds the probe tunnels.
	Bridge = "br-kovn-peers"
	// DstPort is the probe tunnels' Geneve port.
	DstPort = 6082
	// The sessions' timers: a gateway cut off is seen in 0.3 s. A false alarm moves no
	// gateway port (nothing to fight over): it takes a cluster's endpoints out of the load
	// balancers until the next BFD packet that comes through.
	IntervalMillis = 100
	Mult           = 3
	// OwnerType marks the bridge and the probe interfaces (ovn.OwnerTypeKey); an interface's
	// owner is its AZ.
	OwnerType  = "ICPeerProbe"
	portPrefix = "kovnpeer-"
)

// tunnel is one probe tunnel: toward addr, a gateway of az.
type tunnel struct {
	AZ   string
	Addr netip.Addr
}

// portName is the probe tunnel's port and interface name: 15 characters, a kernel link name.
func portName(addr netip.Addr) string {
	sum := sha256.Sum256([]byte(addr.String()))
	return portPrefix + hex.EncodeToString(sum[:3])
}

// wanted are the tunnels for peers (AZ -> gateway addresses), by port name.
func wanted(peers map[string][]netip.Addr) map[string]tunnel {
	out := map[string]tunnel{}
	for az, addrs := range peers {
		for _, a := range addrs {
			out[portName(a)] = tunnel{AZ: az, Addr: a}
		}
	}
	return out
}

// interfaceRow is the probe interface for t.
func interfaceRow(name string, t tunnel) *vswitch.Interface {
	return &vswitch.Interface{Name: name, Type: "geneve",
		Options: map[string]string{"remote_ip": t.Addr.String(), "dst_port": strconv.Itoa(DstPort)},
		BFD: map[string]string{"enable": "true", "min_rx": strconv.Itoa(IntervalMillis),
			"min_tx": strconv.Itoa(IntervalMillis), "mult": strconv.Itoa(Mult)},
		ExternalIDs: ovn.OwnerIDs(OwnerType, t.AZ, nil)}
}

// syncTunnels makes Bridge hold exactly the tunnels want (no bridge when want is empty), in
// one transaction. datapathType is br-int's.
func syncTunnels(ctx context.Context, c libovsdb.Client, want map[string]tunnel, datapathType string) error {
	br, err := ovn.Get(ctx, c, &vswitch.Bridge{Name: Bridge})
	if errors.Is(err, ovn.ErrNotFound) {
		br = nil
	} else if err != nil {
		return err
	}
	switch {
	case len(want) == 0 && br == nil:
		return nil
	case len(want) == 0: // its ports and interfaces go with it
		return underlay.DeleteBridge(ctx, c, Bridge)
	case br == nil:
		return createBridge(ctx, c, want, datapathType)
	}
	have, stale := probePorts(ctx, c, br, want)
	var ops []ovsdb.Operation
	var added []string
	for name, t := range want {
		row := interfaceRow(name, t)
		cur, ok := have[name]
		switch {
		case !ok:
			o, uuid, err := addPort(c, name, row)
			if err != nil {
				return err
			}
			ops, added = append(ops, o...), append(added, uuid)
		case !maps.Equal(cur.Options, row.Options) || !maps.Equal(cur.BFD, row.BFD) || !maps.Equal(cur.ExternalIDs, row.ExternalIDs):
			row.UUID = cur.UUID
			o, err := c.Where(row).Update(row, &row.Options, &row.BFD, &row.ExternalIDs)
			if err != nil {
				return err
			}
			ops = append(ops, o...)
		}
	}
	var muts []model.Mutation
	if len(added) > 0 {
		muts = append(muts, model.Mutation{Field: &br.Ports, Mutator: ovsdb.MutateOperationInsert, Value: added})
	}
	if len(stale) > 0 { // an unreferenced port and its interface go with it
		muts = append(muts, model.Mutation{Field: &br.Ports, Mutator: ovsdb.MutateOperationDelete, Value: stale})
	}
	if len(muts) > 0 {
		o, err := c.Where(br).Mutate(br, muts...)
		if err != nil {
			return err
		}
		ops = append(ops, o...)
	}
	if len(ops) == 0 {
		return nil
	}
	_, err = ovn.Transact(ctx, c, ops)
	return err
}

// probePorts reads br's probe interfaces by port name, and the UUIDs of its ports that are
// not wanted (the bridge's internal port aside).
func probePorts(ctx context.Context, c libovsdb.Client, br *vswitch.Bridge, want map[string]tunnel) (map[string]*vswitch.Interface, []string) {
	have := map[string]*vswitch.Interface{}
	var stale []string
	for _, uuid := range br.Ports {
		p, err := ovn.Get(ctx, c, &vswitch.Port{UUID: uuid})
		if err != nil || p.Name == Bridge {
			continue
		}
		if _, ok := want[p.Name]; !ok || len(p.Interfaces) != 1 {
			stale = append(stale, uuid)
			continue
		}
		if i, err := ovn.Get(ctx, c, &vswitch.Interface{UUID: p.Interfaces[0]}); err == nil {
			have[p.Name] = i
		}
	}
	return have, stale
}

// addPort is the operations creating a port named name with interface iface; uuid is the
// port's named UUID, for the bridge's ports.
func addPort(c libovsdb.Client, name string, iface *vswitch.Interface) (ops []ovsdb.Operation, uuid string, err error) {
	iface.UUID = ovn.NewNamedUUID()
	o, err := c.Create(iface)
	if err != nil {
		return nil, "", err
	}
	port := &vswitch.Port{UUID: ovn.NewNamedUUID(), Name: name, Interfaces: []string{iface.UUID}}
	p, err := c.Create(port)
	if err != nil {
		return nil, "", err
	}
	return append(o, p...), port.UUID, nil
}

// createBridge creates Bridge with its internal port (as ovs-vsctl add-br makes it) and the
// tunnels want, and adds it to the Open_vSwitch row, in one transaction.
func createBridge(ctx context.Context, c libovsdb.Client, want map[string]tunnel, datapathType string) error {
	ops, internal, err := addPort(c, Bridge, &vswitch.Interface{Name: Bridge, Type: "internal"})
	if err != nil {
		return err
	}
	ports := []string{internal}
	for name, t := range want {
		o, uuid, err := addPort(c, name, interfaceRow(name, t))
		if err != nil {
			return err
		}
		ops, ports = append(ops, o...), append(ports, uuid)
	}
	br := &vswitch.Bridge{UUID: ovn.NewNamedUUID(), Name: Bridge, DatapathType: datapathType, Ports: ports,
		ExternalIDs: ovn.OwnerIDs(OwnerType, "", nil)}
	o, err := c.Create(br)
	if err != nil {
		return err
	}
	root, err := ovn.OpenVSwitchRoot(ctx, c)
	if err != nil {
		return err
	}
	m, err := c.Where(root).Mutate(root, model.Mutation{Field: &root.Bridges, Mutator: ovsdb.MutateOperationInsert, Value: []string{br.UUID}})
	if err != nil {
		return err
	}
	_, err = ovn.Transact(ctx, c, append(append(ops, o...), m...))
	return err
}

// sessions are the probe interfaces' BFD states by AZ ("up", "down", "init", "admin_down"; an
// interface without a state yet is left out).
func sessions(ctx context.Context, c libovsdb.Client) (map[string][]string, error) {
	rows, err := ovn.Find(ctx, c, ovn.OwnedBy[*vswitch.Interface](OwnerType, ""))
	if err != nil {
		return nil, err
	}
	out := map[string][]string{}
	for _, i := range rows {
		if st, ok := i.BFDStatus["state"]; ok {
			az := i.ExternalIDs[ovn.OwnerKey]
			out[az] = append(out[az], st)
		}
	}
	return out, nil
}
