package bootstrap

import (
	"context"
	"fmt"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/event"
)

// WatchOvn0 sends an event on out whenever ovn0 is created anew, deleted, or loses an
// address, until ctx ends. ovn0 is an OVS internal port: when its port is deleted and added
// again (OVS reinstalled, its database reset, an admin's ovs-vsctl) the device comes back
// bare. Without this the node would wait for its one-minute resync to get ovn0's addresses
// and routes back, and host-to-pod and Service traffic would stop for that long. Events are
// coalesced: out is meant to hold one.
func WatchOvn0(ctx context.Context, out chan<- event.GenericEvent) error {
	done := make(chan struct{})
	defer close(done)
	links := make(chan netlink.LinkUpdate, 64)
	addrs := make(chan netlink.AddrUpdate, 64)
	if err := netlink.LinkSubscribe(links, done); err != nil {
		return fmt.Errorf("watching links: %w", err)
	}
	if err := netlink.AddrSubscribe(addrs, done); err != nil {
		return fmt.Errorf("watching addresses: %w", err)
	}
	index := 0
	if l, err := netlink.LinkByName(Ovn0); err == nil {
		index = l.Attrs().Index
	}
	notify := func() {
		select {
		case out <- event.GenericEvent{Object: &corev1.Node{}}:
		default: // one is pending already
		}
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case u, ok := <-links:
			if !ok {
				return fmt.Errorf("link subscription closed")
			}
			if u.Attrs().Name != Ovn0 {
				continue
			}
			deleted := u.Header.Type == unix.RTM_DELLINK
			if deleted || u.Attrs().Index != index {
				index = u.Attrs().Index
				notify()
			}
		case u, ok := <-addrs:
			if !ok {
				return fmt.Errorf("address subscription closed")
			}
			if !u.NewAddr && u.LinkIndex == index {
				notify()
			}
		}
	}
}
