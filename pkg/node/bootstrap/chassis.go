package bootstrap

import (
	"context"
	"fmt"
	"maps"

	libovsdb "github.com/ovn-org/libovsdb/client"

	"github.com/kovn/kovn/pkg/ovn"
	"github.com/kovn/kovn/pkg/ovn/model/vswitch"
)

// ChassisIdentity is what ovn-controller reads from Open_vSwitch external_ids to register the
// node as an OVN chassis.
type ChassisIdentity struct {
	SystemID  string // chassis name: the node name
	OVNRemote string // southbound DB, e.g. tcp:10.0.0.1:6642; empty leaves it as it is
	EncapIP   string // tunnel endpoint: the node address
	Netdev    bool   // userspace datapath: br-int with datapath_type=netdev
	// Interconn makes the chassis an OVN-IC gateway (ovn-is-interconn): the InterConnect
	// named this node (kovn-controller's annotation), and ovn-ic publishes it to other AZs.
	Interconn bool
	// TransitKeys are the tunnel keys of the cluster's transit switch ports (kovn-controller's
	// annotation on a gateway node), written as external_ids:kovn-ic-transit-keys. Any change of
	// the row's external_ids makes ovn-controller rebuild all its physical flows: after ovn-ic
	// re-keyed a transit port, ovn-controller 23.03's incremental path leaves the router port's
	// patch flow with the old key, and only a rebuild replaces it.
	TransitKeys string
}

// TransitKeysID is the Open_vSwitch external_ids key holding ChassisIdentity.TransitKeys.
const TransitKeysID = "kovn-ic-transit-keys"

// EnsureChassisIdentity merges the identity into the Open_vSwitch row's external_ids, leaving
// every other key alone. Idempotent: no transaction when nothing changes.
func EnsureChassisIdentity(ctx context.Context, c libovsdb.Client, id ChassisIdentity) error {
	var rows []vswitch.OpenvSwitch
	if err := c.List(ctx, &rows); err != nil {
		return err
	}
	if len(rows) != 1 {
		return fmt.Errorf("Open_vSwitch table has %d rows, want 1 (is ovsdb-server initialised?)", len(rows))
	}
	row := rows[0]
	want := maps.Clone(row.ExternalIDs)
	if want == nil {
		want = map[string]string{}
	}
	want["system-id"], want["hostname"] = id.SystemID, id.SystemID
	want["ovn-encap-type"], want["ovn-encap-ip"] = "geneve", id.EncapIP
	if id.OVNRemote != "" {
		want["ovn-remote"] = id.OVNRemote
	}
	if id.Netdev {
		want["ovn-bridge-datapath-type"] = "netdev"
	}
	if id.Interconn {
		want["ovn-is-interconn"] = "true"
	} else {
		delete(want, "ovn-is-interconn")
	}
	if id.TransitKeys != "" {
		want[TransitKeysID] = id.TransitKeys
	} else {
		delete(want, TransitKeysID)
	}
	if maps.Equal(want, row.ExternalIDs) {
		return nil
	}
	row.ExternalIDs = want
	ops, err := c.Where(&row).Update(&row, &row.ExternalIDs)
	if err != nil {
		return err
	}
	_, err = ovn.Transact(ctx, c, ops)
	return err
}
