package cni

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/kovn/kovn/pkg/hostnet"
)

// HostIfName returns the node-side veth name of a pod sandbox: the first 12 characters of
// the container id plus "_h" (15 characters, the kernel's limit). An id that is shorter
// or has characters other than letters and digits is hashed first, so the name is always
// valid and always the same for the same id: DEL finds the veth from the id alone.
func HostIfName(containerID string) string {
	id := containerID
	if len(id) < 12 || strings.IndexFunc(id[:12], func(r rune) bool {
		return !('0' <= r && r <= '9' || 'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z')
	}) >= 0 {
		sum := sha256.Sum256([]byte(containerID))
		id = hex.EncodeToString(sum[:])
	}
	return id[:12] + "_h"
}

// vethSpec is what to build for one pod interface.
type vethSpec struct {
	hostIf, podIf string
	mtu           int
	mac           net.HardwareAddr
	ips           []netip.Prefix
	routes        []Route
}

// createHostVeth creates the veth pair from the calling thread's (the node's) namespace:
// hostIf here, podIf directly inside podNS with the pod's MAC, both with the pod's MTU.
// The host end gets TX checksum offload off and is brought up. A leftover veth of the
// same name (an ADD retried after the daemon died half-way) is replaced. On error
// nothing is left behind. It returns the host end's MAC.
func createHostVeth(spec *vethSpec, podNS netns.NsHandle) (mac net.HardwareAddr, err error) {
	if err := deleteVeth(spec.hostIf); err != nil {
		return nil, err
	}
	attrs := netlink.NewLinkAttrs()
	attrs.Name = spec.hostIf
	attrs.MTU = spec.mtu
	veth := netlink.NewVeth(attrs)
	veth.PeerName = spec.podIf
	veth.PeerHardwareAddr = spec.mac
	veth.PeerNamespace = netlink.NsFd(podNS)
	if err := netlink.LinkAdd(veth); err != nil {
		if errors.Is(err, unix.EEXIST) {
			return nil, fmt.Errorf("creating veth %s (node) <-> %s (pod): %s already exists in the pod's network namespace: %w",
				spec.hostIf, spec.podIf, spec.podIf, err)
		}
		return nil, fmt.Errorf("creating veth %s (node) <-> %s (pod): %w", spec.hostIf, spec.podIf, err)
	}
	defer func() {
		if err != nil {
			_ = deleteVeth(spec.hostIf)
		}
	}()
	link, err := netlink.LinkByName(spec.hostIf)
	if err != nil {
		return nil, fmt.Errorf("reading back veth %s: %w", spec.hostIf, err)
	}
	if err := hostnet.SetTxChecksum(spec.hostIf, false); err != nil {
		return nil, err
	}
	if err := netlink.LinkSetUp(link); err != nil {
		return nil, fmt.Errorf("bringing up %s: %w", spec.hostIf, err)
	}
	return link.Attrs().HardwareAddr, nil
}

// configurePodIf finishes the pod end from inside the pod's namespace: TX checksum
// offload off, links up (lo too), addresses (IPv6 without duplicate address detection, so
// they are usable at once) and routes. It returns the pod interface's MAC.
func configurePodIf(spec *vethSpec) (net.HardwareAddr, error) {
	link, err := netlink.LinkByName(spec.podIf)
	if err != nil {
		return nil, fmt.Errorf("finding %s in the pod's network namespace: %w", spec.podIf, err)
	}
	if err := hostnet.SetTxChecksum(spec.podIf, false); err != nil {
		return nil, err
	}
	if err := bringUpLoopback(); err != nil {
		return nil, err
	}
	if err := netlink.LinkSetUp(link); err != nil {
		return nil, fmt.Errorf("bringing up %s in the pod: %w", spec.podIf, err)
	}
	for _, ip := range spec.ips {
		if ip.Addr().Is6() {
			if err := hostnet.EnableIPv6(spec.podIf); err != nil {
				return nil, err
			}
		}
		if err := netlink.AddrReplace(link, hostnet.AddrNoDAD(ip)); err != nil {
			return nil, fmt.Errorf("adding address %s to %s in the pod: %w", ip, spec.podIf, err)
		}
	}
	for _, r := range spec.routes {
		if err := netlink.RouteReplace(podRoute(link.Attrs().Index, r)); err != nil {
			return nil, fmt.Errorf("adding route to %s via %s in the pod: %w", r.Dst, routeVia(r), err)
		}
	}
	return link.Attrs().HardwareAddr, nil
}

// bringUpLoopback sets lo up if it is not (runtimes usually do it already).
func bringUpLoopback() error {
	lo, err := netlink.LinkByName("lo")
	if err != nil {
		return fmt.Errorf("finding lo in the pod: %w", err)
	}
	if lo.Attrs().Flags&net.FlagUp != 0 {
		return nil
	}
	if err := netlink.LinkSetUp(lo); err != nil {
		return fmt.Errorf("bringing up lo in the pod: %w", err)
	}
	return nil
}

// podRoute is the netlink route for r through the link with index linkIndex.
func podRoute(linkIndex int, r Route) *netlink.Route {
	nr := &netlink.Route{LinkIndex: linkIndex, Dst: hostnet.IPNet(r.Dst.Masked()), Scope: netlink.SCOPE_UNIVERSE}
	if r.Gateway.IsValid() {
		nr.Gw = r.Gateway.AsSlice()
	} else {
		nr.Scope = netlink.SCOPE_LINK
	}
	return nr
}

func routeVia(r Route) string {
	if r.Gateway.IsValid() {
		return r.Gateway.String()
	}
	return "link"
}

// deleteVeth deletes the veth named name in the calling thread's namespace, which also
// deletes its peer wherever that is. A missing link is not an error; a link of that name
// that is not a veth is left alone and reported.
func deleteVeth(name string) error {
	link, err := netlink.LinkByName(name)
	if isLinkNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("looking up %s: %w", name, err)
	}
	if link.Type() != "veth" {
		return fmt.Errorf("%s is a %s link, not a veth created by kovn; leaving it alone", name, link.Type())
	}
	if err := netlink.LinkDel(link); err != nil && !isLinkNotFound(err) {
		return fmt.Errorf("deleting veth %s: %w", name, err)
	}
	return nil
}

func isLinkNotFound(err error) bool {
	var notFound netlink.LinkNotFoundError
	return errors.As(err, &notFound) || errors.Is(err, unix.ENODEV)
}
