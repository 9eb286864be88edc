package bgp

import (
	"context"
	"fmt"
	"net/netip"

	"github.com/go-logr/logr"
	"github.com/vishvananda/netlink"

	"github.com/kovn/kovn/pkg/hostnet"
)

// WatchAddresses resets the sessions that run from an address the node just lost, so they
// reconnect from its current address (and the peer learns the new next hop) at once rather
// than after the hold time. It runs until ctx ends.
func WatchAddresses(ctx context.Context, sp Speaker, log logr.Logger) error {
	updates := make(chan netlink.AddrUpdate, 64)
	done := make(chan struct{})
	defer close(done)
	if err := netlink.AddrSubscribeWithOptions(updates, done, netlink.AddrSubscribeOptions{
		ErrorCallback: func(err error) { log.Error(err, "address watch") }}); err != nil {
		return fmt.Errorf("watch the node's addresses: %w", err)
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case u, ok := <-updates:
			if !ok {
				return fmt.Errorf("address watch closed")
			}
			if u.NewAddr {
				continue
			}
			if err := sp.ResetSessionsFrom(ctx, nodeHasAddress); err != nil {
				log.Error(err, "reset sessions after an address change")
			}
		}
	}
}

// nodeHasAddress says whether a is still one of the node's addresses.
func nodeHasAddress(a netip.Addr) bool {
	addrs, err := hostnet.AddrList(nil, netlink.FAMILY_ALL)
	if err != nil {
		return true // unknown: do not tear a session down on a failed lookup
	}
	for _, x := range addrs {
		if b, ok := netip.AddrFromSlice(x.IP); ok && b.Unmap() == a.Unmap() {
			return true
		}
	}
	return false
}
