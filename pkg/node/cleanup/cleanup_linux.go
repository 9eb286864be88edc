package cleanup

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/kovn/kovn/pkg/hostnet"
	"github.com/kovn/kovn/pkg/node/bootstrap"
)

// removeRoutes deletes the routes kovn-daemon installed (bootstrap.RouteProtocol, main table: bootstrap.SyncRoutes'
// pod subnets and Service ranges via ovn0). Deleting ovn0 would take them along, but ovn0 may
// outlive this run (see removeLinks), and a route left to a cluster range would swallow the
// node's traffic to that range under the next network plugin.
func (c *cleanup) removeRoutes() {
	for _, fam := range []struct {
		name   string
		family int
	}{{"IPv4", netlink.FAMILY_V4}, {"IPv6", netlink.FAMILY_V6}} {
		routes, err := hostnet.RouteListFiltered(fam.family, &netlink.Route{Protocol: bootstrap.RouteProtocol}, netlink.RT_FILTER_PROTOCOL)
		if errors.Is(err, unix.EAFNOSUPPORT) {
			continue // a kernel without IPv6 has no IPv6 routes to hold
		}
		if err != nil {
			c.failed(fmt.Sprintf("%s routes of protocol %d", fam.name, bootstrap.RouteProtocol), err)
			continue
		}
		for i := range routes {
			item := describeRoute(&routes[i])
			if err := netlink.RouteDel(&routes[i]); err != nil && !errors.Is(err, unix.ESRCH) {
				c.failed(item, err)
				continue
			}
			c.removed("%s", item)
		}
	}
}

// removeAddrSets removes kovn's ipsets (named as its chains: the node's own pods, which its
// NodePort rules match).
func (c *cleanup) removeAddrSets() {
	names, err := hostnet.AddrSetNames(kovnChainPrefix)
	if err != nil {
		c.failed("ipsets "+kovnChainPrefix+"*", err)
		return
	}
	for _, n := range names {
		if err := hostnet.DestroyAddrSet(n); err != nil {
			c.failed("ipset "+n, err)
			continue
		}
		c.removed("ipset %s", n)
	}
}

// describeRoute says a route the way `ip route` would.
func describeRoute(r *netlink.Route) string {
	s := "route " + r.Dst.String()
	if r.Gw != nil {
		s += " via " + r.Gw.String()
	}
	if l, err := netlink.LinkByIndex(r.LinkIndex); err == nil {
		s += " dev " + l.Attrs().Name
	}
	return fmt.Sprintf("%s proto %d", s, r.Protocol)
}

// removeLinks makes sure the kernel devices of kovn's OVS ports are gone. ovs-vswitchd removes
// an internal port's device once its bridge is deleted; it gets linkGrace for that, then the
// device is deleted directly (a tap of the userspace datapath can be; the kernel datapath's
// internal devices cannot, and their failure names the cause). The pods' veths are deleted at
// once: nothing else would, while their pods live.
func (c *cleanup) removeLinks(ctx context.Context) {
	deadline := time.Now().Add(c.opts.linkGrace)
	seen := map[string]bool{}
	for _, l := range c.links {
		if seen[l.name] {
			continue
		}
		seen[l.name] = true
		item := fmt.Sprintf("kernel link %s (%s)", l.name, l.what)
		if l.internal && waitLinkGone(ctx, l.name, deadline) {
			c.removed("%s, with its OVS port", item)
			continue
		}
		link, err := netlink.LinkByName(l.name)
		var notFound netlink.LinkNotFoundError
		if errors.As(err, &notFound) {
			continue // went meanwhile: a pod's netns deleted takes its veth along
		}
		if err == nil {
			err = netlink.LinkDel(link)
		}
		if err != nil {
			if l.internal {
				err = fmt.Errorf("still there %s after its bridge was deleted (is ovs-vswitchd running?): %w", c.opts.linkGrace, err)
			}
			c.failed(item, err)
			continue
		}
		c.removed("%s", item)
	}
}

// waitLinkGone polls until the device name is gone or the deadline passes; true if gone.
func waitLinkGone(ctx context.Context, name string, deadline time.Time) bool {
	for {
		if !linkExists(name) {
			return true
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return false
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// linkExists reports whether the kernel has a device of that name (an error reading it counts
// as there, so that removeLinks tries and reports it).
func linkExists(name string) bool {
	_, err := netlink.LinkByName(name)
	var notFound netlink.LinkNotFoundError
	return !errors.As(err, &notFound)
}
