package hostnet

import (
	"errors"

	"github.com/vishvananda/netlink"
)

// Every netlink dump kovn makes goes through these wrappers (a unit test, lint_test.go,
// fails on any other). A dump spans several messages; when the set changes meanwhile the
// kernel flags the dump as interrupted, and netlink v1.3 reports ErrDumpInterrupted with a
// possibly partial result instead of returning it silently. A node's addresses, routes and
// neighbours change all the time, so a caller acting on a partial list would delete or
// miss what it did not see: the dump is simply repeated, as containernetworking/plugins'
// netlinksafe does.

// dumpAttempts is how many times an interrupted dump is made before its error is returned;
// each interruption needs a change racing a dump of a few milliseconds.
const dumpAttempts = 5

// retryDump makes dump until it is not interrupted, at most dumpAttempts times.
func retryDump[T any](dump func() ([]T, error)) ([]T, error) {
	for range dumpAttempts - 1 {
		out, err := dump()
		if !errors.Is(err, netlink.ErrDumpInterrupted) {
			return out, err
		}
	}
	return dump()
}

// AddrList is netlink.AddrList, repeated while interrupted.
func AddrList(link netlink.Link, family int) ([]netlink.Addr, error) {
	return retryDump(func() ([]netlink.Addr, error) { return netlink.AddrList(link, family) })
}

// RouteList is netlink.RouteList, repeated while interrupted.
func RouteList(link netlink.Link, family int) ([]netlink.Route, error) {
	return retryDump(func() ([]netlink.Route, error) { return netlink.RouteList(link, family) })
}

// RouteListFiltered is netlink.RouteListFiltered, repeated while interrupted.
func RouteListFiltered(family int, filter *netlink.Route, filterMask uint64) ([]netlink.Route, error) {
	return retryDump(func() ([]netlink.Route, error) { return netlink.RouteListFiltered(family, filter, filterMask) })
}

// NeighList is netlink.NeighList, repeated while interrupted.
func NeighList(linkIndex, family int) ([]netlink.Neigh, error) {
	return retryDump(func() ([]netlink.Neigh, error) { return netlink.NeighList(linkIndex, family) })
}

// LinkList is netlink.LinkList, repeated while interrupted.
func LinkList() ([]netlink.Link, error) {
	return retryDump(netlink.LinkList)
}
