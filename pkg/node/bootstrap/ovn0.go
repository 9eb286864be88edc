// Package node is kovn-daemon's node bootstrap: the node's ovn0 port on the join subnet,
// routes from the node to every pod subnet through it, SNAT (IPv4 and IPv6) for subnets with
// natOutgoing, the node's chassis identity in Open_vSwitch, and the CNI config file that turns
// the node Ready once what pods need is in place. Each is a Step (node_steps.go) that fails, retries
// and reports on its own.
package bootstrap

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"time"

	libovsdb "github.com/ovn-org/libovsdb/client"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/kovn/kovn/pkg/cni"
	"github.com/kovn/kovn/pkg/hostnet"
)

// Ovn0 is the node's port on the join subnet.
const Ovn0 = "ovn0"

// JoinConfig is the node's join addressing, from the annotations kovn-controller wrote.
type JoinConfig struct {
	IPs      []netip.Prefix // 100.64.0.2/16
	Gateways []netip.Addr   // 100.64.0.1
	MAC      string
	IfaceID  string // logical switch port name: node-<name>
	MTU      int
}

// EnsureOvn0 creates ovn0 as an OVS internal port on br-int bound to the node's join switch
// port, then configures its MAC, MTU and addresses. Idempotent.
func EnsureOvn0(ctx context.Context, ovs libovsdb.Client, bridge string, jc JoinConfig) (netlink.Link, error) {
	if err := cni.NewOVSAttacher(ovs, bridge).AttachInternal(ctx, Ovn0, jc.IfaceID, jc.MAC); err != nil {
		return nil, err
	}
	link, err := hostnet.WaitLink(ctx, Ovn0, 30*time.Second)
	if err != nil {
		return nil, err
	}
	hw, err := net.ParseMAC(jc.MAC)
	if err != nil {
		return nil, err
	}
	if link.Attrs().HardwareAddr.String() != hw.String() {
		if err := netlink.LinkSetHardwareAddr(link, hw); err != nil {
			return nil, fmt.Errorf("set %s MAC: %w", Ovn0, err)
		}
	}
	if jc.MTU > 0 && link.Attrs().MTU != jc.MTU {
		if err := netlink.LinkSetMTU(link, jc.MTU); err != nil {
			return nil, fmt.Errorf("set %s MTU: %w", Ovn0, err)
		}
	}
	if err := setAddrs(link, jc.IPs); err != nil {
		return nil, err
	}
	if err := netlink.LinkSetUp(link); err != nil {
		return nil, err
	}
	// Packets ovn0 sends enter the userspace datapath, which does not fill offloaded checksums.
	if err := hostnet.SetTxChecksum(Ovn0, false); err != nil {
		return nil, fmt.Errorf("disable tx checksum offload on %s: %w", Ovn0, err)
	}
	return link, nil
}

// setAddrs adds the node's join addresses to link; IPv6 ones without duplicate address
// detection, so the node can reach pods through ovn0 as soon as it is up.
func setAddrs(link netlink.Link, ips []netip.Prefix) error {
	if slices.ContainsFunc(ips, func(p netip.Prefix) bool { return p.Addr().Is6() }) {
		if err := ipv6Sysctls(link.Attrs().Name); err != nil {
			return err
		}
		if err := dropDADStuck(link, ips); err != nil {
			return err
		}
	}
	for _, p := range ips {
		if err := netlink.AddrReplace(link, hostnet.AddrNoDAD(p)); err != nil {
			return fmt.Errorf("address %s on %s: %w", p, link.Attrs().Name, err)
		}
	}
	return nil
}

// dropDADStuck deletes those of ips already on link that duplicate address detection failed
// or still holds tentative (added before kovn set IFA_F_NODAD, or by hand): replacing an
// address does not reset its DAD state, so a "dadfailed" address would stay unusable for good.
// Added again afterwards, without DAD, it is usable at once.
func dropDADStuck(link netlink.Link, ips []netip.Prefix) error {
	cur, err := hostnet.AddrList(link, netlink.FAMILY_V6)
	if err != nil {
		return fmt.Errorf("list addresses of %s: %w", link.Attrs().Name, err)
	}
	for i := range cur {
		a, ok := netip.AddrFromSlice(cur[i].IP)
		stuck := cur[i].Flags&(unix.IFA_F_DADFAILED|unix.IFA_F_TENTATIVE) != 0 && cur[i].Flags&unix.IFA_F_NODAD == 0
		if !ok || !stuck || !slices.ContainsFunc(ips, func(p netip.Prefix) bool { return p.Addr() == a.Unmap() }) {
			continue
		}
		if err := netlink.AddrDel(link, &cur[i]); err != nil {
			return fmt.Errorf("remove %s from %s (DAD failed or pending): %w", cur[i].IPNet, link.Attrs().Name, err)
		}
	}
	return nil
}

// ipv6Sysctls readies ifName for its IPv6 join address: IPv6 enabled (nodes may disable it for
// new interfaces by default) and router advertisements ignored. The join router port answers
// router solicitations (ipv6_ra_configs), and an RA accepted on ovn0 would give the node a
// second IPv6 default route, into the cluster, for as long as forwarding is not on yet (with
// forwarding on the kernel ignores RAs anyway).
func ipv6Sysctls(ifName string) error {
	if err := hostnet.EnableIPv6(ifName); err != nil {
		return err
	}
	return hostnet.IgnoreRouterAdvertisements(ifName)
}
