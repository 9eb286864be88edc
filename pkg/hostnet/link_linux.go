package hostnet

import (
	"context"
	"fmt"
	"net/netip"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// WaitLink waits up to timeout for the link name to appear in the calling thread's netns.
// Links made by ovs-vswitchd (internal ports, bridges) appear a moment after the OVSDB
// transaction that asks for them commits.
func WaitLink(ctx context.Context, name string, timeout time.Duration) (netlink.Link, error) {
	deadline := time.Now().Add(timeout)
	for {
		link, err := netlink.LinkByName(name)
		if err == nil {
			return link, nil
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("%s did not appear within %s (is ovs-vswitchd running?): %w", name, timeout, err)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// AddrNoDAD is the netlink address for ip as kovn adds it to a pod interface or ovn0: IPv6
// addresses skip duplicate address detection (IFA_F_NODAD). Uniqueness is already guaranteed:
// kovn's IPAM hands each address out once and OVN's port security drops packets from any
// other MAC/address pair, so DAD would find nothing and only keep the address "tentative"
// (unusable as a source, no bind) for a second or two after the interface comes up.
func AddrNoDAD(ip netip.Prefix) *netlink.Addr {
	addr := &netlink.Addr{IPNet: IPNet(ip)}
	if ip.Addr().Is6() {
		addr.Flags = unix.IFA_F_NODAD
	}
	return addr
}
