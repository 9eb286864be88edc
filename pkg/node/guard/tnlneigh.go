package guard

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"time"

	"github.com/ovn-org/libovsdb/cache"
	libovsdb "github.com/ovn-org/libovsdb/client"
	"github.com/ovn-org/libovsdb/model"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/kovn/kovn/pkg/hostnet"
	"github.com/kovn/kovn/pkg/ovn"
	"github.com/kovn/kovn/pkg/ovn/model/vswitch"
)

// TunnelNeighbours keeps OVS's tunnel neighbour cache filled on a userspace datapath, from the
// kernel's neighbour table.
//
// With the kernel datapath the kernel resolves a tunnel's next hop itself, queueing packets
// meanwhile. OVS's userspace datapath keeps its own cache instead: on a miss it drops the
// packet, sends one ARP/ND request and learns the answer only if the reply reaches ovs-vswitchd
// as an upcall. A reply that matches a datapath flow cached from an earlier reply (same peer,
// within its 10 s idle time) is forwarded without being learned, and the drop flow installed
// for the miss stays cached as long as traffic keeps hitting it: no upcall, no new request. In
// the lab a cluster that had just joined was then unreachable for 30-60 s, until some
// unrelated flow change made OVS translate the drop flow again.
//
// The keeper looks at every tunnel's next hop (the remote IP, or the gateway the route names)
// and, when OVS has no live entry for it, asks the kernel to resolve it (NTF_USE: an ARP/ND
// probe, as if a packet were sent) and copies the kernel's answer into OVS (tnl/neigh/set,
// which also makes OVS translate its cached flows again).
type TunnelNeighbours struct {
	OVS      libovsdb.Client
	Socket   VswitchdSocket // ovs-vswitchd's control socket
	Interval time.Duration  // how often to look without a tunnel change (default 1 s)
}

// NeedLeaderElection: every node keeps its own datapath's cache.
func (k *TunnelNeighbours) NeedLeaderElection() bool { return false }

// Start implements manager.Runnable.
func (k *TunnelNeighbours) Start(ctx context.Context) error {
	if k.Interval == 0 {
		k.Interval = time.Second
	}
	log := ctrl.Log.WithName("tunnel-neighbours")
	changed := make(chan struct{}, 1)
	kick := func(table string) {
		if table != "Interface" {
			return
		}
		select {
		case changed <- struct{}{}:
		default:
		}
	}
	k.OVS.Cache().AddEventHandler(&cache.EventHandlerFuncs{
		AddFunc:    func(table string, _ model.Model) { kick(table) },
		UpdateFunc: func(table string, _, _ model.Model) { kick(table) },
	})
	quick := false
	for {
		next := k.Interval
		set, resolving, err := k.sync(ctx)
		if err != nil {
			log.Error(err, "keeping the tunnel neighbour cache")
		}
		for _, n := range set {
			log.Info("tunnel neighbour set from the kernel's table", "bridge", n.Bridge, "ip", n.IP, "mac", n.MAC)
		}
		// An ARP/ND answer takes milliseconds: look again soon, once (a dead peer is probed
		// once per interval, not five times a second).
		if quick = resolving && !quick; quick {
			next = 200 * time.Millisecond
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(next):
		case <-changed:
		}
	}
}

// tunnelNeighbour is one next hop of a tunnel: its address, the bridge whose port holds the
// route to it (and that port's kernel link index), and its MAC.
type tunnelNeighbour struct {
	Bridge string
	Link   int
	IP     netip.Addr
	MAC    string
}

// kernelNeighbour is what the kernel's neighbour table says of a next hop.
type kernelNeighbour struct {
	MAC   string
	State int // NUD_*
}

// sync does one round: it returns the entries it copied into OVS and whether it asked the
// kernel to resolve a next hop (whose answer the next round copies).
func (k *TunnelNeighbours) sync(ctx context.Context) ([]tunnelNeighbour, bool, error) {
	hops, err := k.nextHops(ctx)
	if err != nil || len(hops) == 0 {
		return nil, false, err
	}
	ctl, err := k.ctl()
	if err != nil {
		return nil, false, err
	}
	out, err := ovn.Unixctl(ctx, ctl, "tnl/neigh/show")
	if err != nil {
		return nil, false, err
	}
	inOVS := parseTunnelNeighbours(out)
	table, err := kernelNeighbours()
	if err != nil {
		return nil, false, err
	}
	kernel := map[netip.Addr]kernelNeighbour{}
	for _, h := range hops {
		kernel[h.IP] = table[kernelNeighbourKey{h.Link, h.IP}]
	}
	set, resolve := tunnelNeighbourPlan(hops, inOVS, kernel)
	for _, h := range resolve {
		if err := resolveKernelNeighbour(h); err != nil {
			return nil, false, err
		}
	}
	for _, n := range set {
		if _, err := ovn.Unixctl(ctx, ctl, "tnl/neigh/set", n.Bridge, n.IP.String(), n.MAC); err != nil {
			return nil, false, err
		}
	}
	return set, len(resolve) > 0, nil
}

// ctl is ovs-vswitchd's control socket: the configured one, or the one its daemon made in the
// run directory (named after its pid, which changes when it restarts).
func (k *TunnelNeighbours) ctl() (string, error) { return k.Socket.Path() }

// nextHops are the next hops of the node's tunnels: each tunnel Interface's remote_ip, routed
// by the kernel (a gateway if the route has one), with the device the route leaves by.
func (k *TunnelNeighbours) nextHops(ctx context.Context) ([]tunnelNeighbour, error) {
	var ifaces []*vswitch.Interface
	err := k.OVS.WhereCache(func(i *vswitch.Interface) bool {
		return i.Type == "geneve" || i.Type == "vxlan" || i.Type == "stt"
	}).List(ctx, &ifaces)
	if err != nil {
		return nil, err
	}
	seen := map[netip.Addr]bool{}
	var hops []tunnelNeighbour
	for _, i := range ifaces {
		remote, err := netip.ParseAddr(i.Options["remote_ip"])
		if err != nil {
			continue // "flow" or unset: nothing fixed to resolve
		}
		routes, err := netlink.RouteGet(remote.AsSlice())
		if err != nil || len(routes) == 0 {
			continue
		}
		hop := remote
		if gw, ok := netip.AddrFromSlice(routes[0].Gw); ok && routes[0].Gw != nil {
			hop = gw.Unmap()
		}
		link, err := netlink.LinkByIndex(routes[0].LinkIndex)
		if err != nil || seen[hop] {
			continue // several remotes behind one gateway share its entry
		}
		seen[hop] = true
		hops = append(hops, tunnelNeighbour{Bridge: link.Attrs().Name, Link: routes[0].LinkIndex, IP: hop})
	}
	return hops, nil
}

// parseTunnelNeighbours reads tnl/neigh/show: "IP MAC BRIDGE [STALE]" per line after the
// header; an expired (STALE) entry is left out, as OVS no longer uses it.
func parseTunnelNeighbours(out string) map[netip.Addr]tunnelNeighbour {
	m := map[netip.Addr]tunnelNeighbour{}
	for _, l := range strings.Split(out, "\n") {
		f := strings.Fields(l)
		if len(f) < 3 || len(f) > 3 && f[3] == "STALE" {
			continue
		}
		ip, err := netip.ParseAddr(f[0])
		if err != nil {
			continue
		}
		m[ip.Unmap()] = tunnelNeighbour{Bridge: f[2], IP: ip.Unmap(), MAC: f[1]}
	}
	return m
}

// tunnelNeighbourPlan decides, per next hop, what to copy into OVS and what the kernel must
// resolve first. OVS's entry, once there, wins over a kernel entry the kernel has not
// confirmed lately (STALE): OVS may have learned a newer MAC from the wire. A confirmed kernel
// entry that differs replaces it (the peer's MAC changed).
func tunnelNeighbourPlan(hops []tunnelNeighbour, inOVS map[netip.Addr]tunnelNeighbour, kernel map[netip.Addr]kernelNeighbour) (set, resolve []tunnelNeighbour) {
	for _, h := range hops {
		o, have := inOVS[h.IP]
		kn := kernel[h.IP]
		confirmed := kn.MAC != "" && kn.State&(unix.NUD_REACHABLE|unix.NUD_PERMANENT|unix.NUD_NOARP) != 0
		usable := confirmed || kn.MAC != "" && kn.State&(unix.NUD_STALE|unix.NUD_DELAY|unix.NUD_PROBE) != 0
		switch {
		case have && o.Bridge == h.Bridge && strings.EqualFold(o.MAC, kn.MAC):
		case have && o.Bridge == h.Bridge && !confirmed:
		case usable:
			set = append(set, tunnelNeighbour{Bridge: h.Bridge, Link: h.Link, IP: h.IP, MAC: kn.MAC})
			if !confirmed {
				resolve = append(resolve, h) // have the kernel confirm what OVS now uses
			}
		default:
			resolve = append(resolve, h)
		}
	}
	return set, resolve
}

// kernelNeighbourKey names a kernel neighbour entry: the link it is on and its address.
type kernelNeighbourKey struct {
	Link int
	IP   netip.Addr
}

// kernelNeighbours is the kernel's neighbour table (both families, every link) in one dump, the
// entries without a MAC left out.
func kernelNeighbours() (map[kernelNeighbourKey]kernelNeighbour, error) {
	neighs, err := hostnet.NeighList(0, netlink.FAMILY_ALL)
	if err != nil {
		return nil, fmt.Errorf("kernel neighbour table: %w", err)
	}
	m := map[kernelNeighbourKey]kernelNeighbour{}
	for _, n := range neighs {
		ip, ok := netip.AddrFromSlice(n.IP)
		if !ok || len(n.HardwareAddr) == 0 {
			continue
		}
		m[kernelNeighbourKey{n.LinkIndex, ip.Unmap()}] = kernelNeighbour{MAC: n.HardwareAddr.String(), State: n.State}
	}
	return m, nil
}

// resolveKernelNeighbour has the kernel probe h as if it had a packet for it (NTF_USE): an
// ARP request or neighbour solicitation on h's device, the entry created if missing.
func resolveKernelNeighbour(h tunnelNeighbour) error {
	family := netlink.FAMILY_V4
	if h.IP.Is6() {
		family = netlink.FAMILY_V6
	}
	n := &netlink.Neigh{LinkIndex: h.Link, Family: family, IP: net.IP(h.IP.AsSlice()), Flags: netlink.NTF_USE}
	if err := netlink.NeighSet(n); err != nil {
		return fmt.Errorf("resolving tunnel next hop %s on %s: %w", h.IP, h.Bridge, err)
	}
	return nil
}
