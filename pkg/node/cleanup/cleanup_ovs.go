package cleanup

import (
	"context"
	"errors"
	"fmt"
	"slices"

	libovsdb "github.com/ovn-org/libovsdb/client"

	kovnv1 "github.com/kovn/kovn/api/v1alpha1"
	"github.com/kovn/kovn/pkg/cni"
	"github.com/kovn/kovn/pkg/node/bootstrap"
	"github.com/kovn/kovn/pkg/node/peerprobe"
	"github.com/kovn/kovn/pkg/ovn"
	"github.com/kovn/kovn/pkg/ovn/model/vswitch"
	"github.com/kovn/kovn/pkg/underlay"
)

// daemonOnlyIDs are the Open_vSwitch external_ids that kovn-daemon alone writes (chassis.go):
// they make the chassis an interconnect gateway, which must not outlive kovn.
var daemonOnlyIDs = []string{"ovn-is-interconn", bootstrap.TransitKeysID}

// sharedIDs are the rest of the chassis identity kovn-daemon writes. The kovn-ovs pod's script
// writes the same keys before ovs-vswitchd starts (deploy/templates/ovs.yaml), so they belong
// to the OVS database it initialised and go with it; removing them here would also strip a
// node whose OVS outlives kovn of its identity.
var sharedIDs = []string{"system-id", "hostname", "ovn-remote", "ovn-encap-type", "ovn-encap-ip", "ovn-bridge-datapath-type"}

// removeMappings drops kovn's entries from ovn-bridge-mappings, leaving other tools' entries.
func (c *cleanup) removeMappings(ctx context.Context, ovs libovsdb.Client) {
	item := "Open_vSwitch external_ids:" + underlay.BridgeMappingsKey
	root, err := openVSwitchRow(ctx, ovs)
	if err != nil {
		c.failed(item, err)
		return
	}
	bridges, err := ovn.Find(ctx, ovs, func(*vswitch.Bridge) bool { return true })
	if err != nil {
		c.failed(item, err)
		return
	}
	cur := underlay.ParseMappings(root.ExternalIDs[underlay.BridgeMappingsKey])
	providers := kovnMappings(cur, bridges)
	if len(providers) == 0 {
		return
	}
	if err := underlay.SetMappings(ctx, ovs, nil, providers); err != nil {
		c.failed(item, err)
		return
	}
	for _, p := range providers {
		c.removed("%s entry %s:%s", item, p, cur[p])
	}
}

// kovnMappings are the providers of mappings whose entry kovn wrote: mapped to br-<provider>
// (kovnv1.BridgeName), and that bridge is one kovn made or no bridge at all (an earlier,
// interrupted cleanup deleted it). An entry naming a bridge of someone else's stays.
func kovnMappings(mappings map[string]string, bridges []*vswitch.Bridge) []string {
	var out []string
	for provider, bridge := range mappings {
		if bridge == "" || bridge != kovnv1.BridgeName(provider) {
			continue
		}
		i := slices.IndexFunc(bridges, func(b *vswitch.Bridge) bool { return b.Name == bridge })
		if i >= 0 && bridges[i].ExternalIDs[ovn.OwnerTypeKey] != underlay.OwnerType {
			continue
		}
		out = append(out, provider)
	}
	slices.Sort(out)
	return out
}

// removeProviderBridges gives each provider bridge's NIC its recorded addresses and routes
// back, then deletes the bridge. A bridge whose record cannot be read is kept: deleting it
// would lose the only copy of what the NIC had.
func (c *cleanup) removeProviderBridges(ctx context.Context, ovs libovsdb.Client) {
	rows, err := ovn.Find(ctx, ovs, ovn.OwnedBy[*vswitch.Bridge](underlay.OwnerType, ""))
	if err != nil {
		c.failed("provider bridges", err)
		return
	}
	for _, br := range rows {
		b := underlay.Bridge{Provider: br.ExternalIDs[ovn.OwnerKey], Name: br.Name, NIC: br.ExternalIDs[underlay.NICKey]}
		item := fmt.Sprintf("provider bridge %s (provider %s, NIC %s)", b.Name, b.Provider, b.NIC)
		if b.Config, err = underlay.DecodeNICConfig(br.ExternalIDs[underlay.NICConfigKey]); err != nil {
			c.failed(item, fmt.Errorf("bridge kept: unreadable %s, so %s cannot get its configuration back: %w", underlay.NICConfigKey, b.NIC, err))
			continue
		}
		links, _ := bridgeLinks(ctx, ovs, br)
		nicGone, err := underlay.GiveBack(ctx, ovs, b)
		if err != nil {
			c.failed(item, err)
			continue
		}
		c.links = append(c.links, links...)
		if nicGone {
			c.removed("%s; the NIC is gone, nothing to give back", item)
			continue
		}
		routes := make([]string, 0, len(b.Config.Routes))
		for _, r := range b.Config.Routes {
			routes = append(routes, r.Dst.String())
		}
		c.removed("%s; %s has its addresses %v and routes %v back", item, b.NIC, b.Config.Addrs, routes)
	}
}

// removeIntegrationBridge deletes br-int with every port on it: ovn0, the pods' ports and
// the tunnels and patch ports ovn-controller made.
func (c *cleanup) removeIntegrationBridge(ctx context.Context, ovs libovsdb.Client) {
	item := "OVS bridge " + c.opts.Bridge
	br, err := ovn.Get(ctx, ovs, &vswitch.Bridge{Name: c.opts.Bridge})
	if errors.Is(err, ovn.ErrNotFound) {
		return
	}
	if err != nil {
		c.failed(item, err)
		return
	}
	links, pods := bridgeLinks(ctx, ovs, br)
	if err := underlay.DeleteBridge(ctx, ovs, br.Name); err != nil {
		c.failed(item, err)
		return
	}
	c.links = append(c.links, links...)
	c.removed("%s with its %d ports, %d of them pods'", item, len(br.Ports), pods)
}

// removePeerProbes deletes the interconnect probe bridge (peerprobe.Bridge) with its tunnels.
func (c *cleanup) removePeerProbes(ctx context.Context, ovs libovsdb.Client) {
	item := "OVS bridge " + peerprobe.Bridge
	br, err := ovn.Get(ctx, ovs, &vswitch.Bridge{Name: peerprobe.Bridge})
	if errors.Is(err, ovn.ErrNotFound) {
		return
	}
	if err != nil {
		c.failed(item, err)
		return
	}
	if err := underlay.DeleteBridge(ctx, ovs, br.Name); err != nil {
		c.failed(item, err)
		return
	}
	c.removed("%s with its %d probe tunnels", item, len(br.Ports)-1)
}

// bridgeLinks are the kernel devices of a bridge's ports that are kovn's to see gone once the
// bridge is deleted: its internal ports (ovs-vswitchd removes them) and the host ends of the
// pods' veths (the pods' own ends keep them alive otherwise). Only devices that exist now are
// listed, so the report says what was really there. pods counts the pods' ports.
func bridgeLinks(ctx context.Context, ovs libovsdb.Client, br *vswitch.Bridge) (links []cleanupLink, pods int) {
	for _, p := range br.Ports {
		port, err := ovn.Get(ctx, ovs, &vswitch.Port{UUID: p})
		if err != nil {
			continue
		}
		for _, u := range port.Interfaces {
			iface, err := ovn.Get(ctx, ovs, &vswitch.Interface{UUID: u})
			if err != nil {
				continue
			}
			pod := iface.ExternalIDs[cni.ExtIDPodName]
			if pod != "" {
				pods++
			}
			var l cleanupLink
			switch {
			case iface.Type == "internal":
				l = cleanupLink{name: iface.Name, what: "internal port of " + br.Name, internal: true}
			case pod != "" && iface.Type == "":
				l = cleanupLink{name: iface.Name, what: "veth of pod " + iface.ExternalIDs[cni.ExtIDPodNamespace] + "/" + pod}
			default:
				continue
			}
			if linkExists(l.name) {
				links = append(links, l)
			}
		}
	}
	return links, pods
}

// removeExternalIDs removes the external_ids only kovn-daemon writes and reports the shared
// ones it leaves.
func (c *cleanup) removeExternalIDs(ctx context.Context, ovs libovsdb.Client) {
	item := "Open_vSwitch external_ids"
	root, err := openVSwitchRow(ctx, ovs)
	if err != nil {
		c.failed(item, err)
		return
	}
	var drop []string
	for _, k := range daemonOnlyIDs {
		if _, ok := root.ExternalIDs[k]; ok {
			drop = append(drop, k)
		}
	}
	if len(drop) > 0 {
		muts := ovn.MapMutations(&root.ExternalIDs, root.ExternalIDs, nil, drop)
		ops, err := ovs.Where(root).Mutate(root, muts...)
		if err == nil {
			_, err = ovn.Transact(ctx, ovs, ops)
		}
		if err != nil {
			c.failed(fmt.Sprintf("%s %v", item, drop), err)
		} else {
			for _, k := range drop {
				c.removed("%s:%s=%s", item, k, root.ExternalIDs[k])
			}
		}
	}
	for _, k := range sharedIDs {
		if v, ok := root.ExternalIDs[k]; ok {
			c.left("%s:%s=%s: the kovn-ovs pod writes it too; it goes with the OVS database", item, k, v)
		}
	}
}

// openVSwitchRow is the database's one Open_vSwitch row.
func openVSwitchRow(ctx context.Context, ovs libovsdb.Client) (*vswitch.OpenvSwitch, error) {
	var rows []vswitch.OpenvSwitch
	if err := ovs.List(ctx, &rows); err != nil {
		return nil, err
	}
	if len(rows) != 1 {
		return nil, fmt.Errorf("Open_vSwitch table has %d rows, want 1", len(rows))
	}
	return &rows[0], nil
}
