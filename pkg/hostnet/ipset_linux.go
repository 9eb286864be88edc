package hostnet

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// SyncAddrSet makes the ipset name a hash:ip set of one family holding exactly addrs (those of
// the other family are skipped), creating it when missing. Sets change membership without a
// firewall rewrite: rules match the set, and a pod that comes or goes changes only the set.
func SyncAddrSet(name string, is4 bool, addrs []netip.Addr) error {
	family := uint8(unix.AF_INET6)
	if is4 {
		family = unix.AF_INET
	}
	set, err := netlink.IpsetList(name)
	if errors.Is(err, unix.ENOENT) {
		if err := netlink.IpsetCreate(name, "hash:ip", netlink.IpsetCreateOptions{Family: family}); err != nil {
			return fmt.Errorf("creating ipset %s: %w", name, err)
		}
		set, err = netlink.IpsetList(name)
	}
	if err != nil {
		return fmt.Errorf("reading ipset %s: %w", name, err)
	}
	if set.TypeName != "hash:ip" || set.Family != family {
		return fmt.Errorf("ipset %s is a %s set of family %d, want hash:ip of family %d", name, set.TypeName, set.Family, family)
	}
	want := map[netip.Addr]bool{}
	for _, a := range addrs {
		if a.IsValid() && a.Unmap().Is4() == is4 {
			want[a.Unmap()] = true
		}
	}
	var errs []error
	for _, e := range set.Entries {
		a, ok := netip.AddrFromSlice(e.IP)
		if a = a.Unmap(); ok && want[a] {
			delete(want, a) // already there
			continue
		}
		if err := netlink.IpsetDel(name, &netlink.IPSetEntry{IP: e.IP}); err != nil {
			errs = append(errs, fmt.Errorf("removing %s from ipset %s: %w", e.IP, name, err))
		}
	}
	for a := range want {
		if err := netlink.IpsetAdd(name, &netlink.IPSetEntry{IP: net.IP(a.AsSlice())}); err != nil {
			errs = append(errs, fmt.Errorf("adding %s to ipset %s: %w", a, name, err))
		}
	}
	return errors.Join(errs...)
}

// AddrSetNames are the names of the ipsets whose name starts with prefix.
func AddrSetNames(prefix string) ([]string, error) {
	sets, err := netlink.IpsetListAll()
	if err != nil {
		return nil, fmt.Errorf("listing ipsets: %w", err)
	}
	var out []string
	for _, s := range sets {
		if strings.HasPrefix(s.SetName, prefix) {
			out = append(out, s.SetName)
		}
	}
	return out, nil
}

// DestroyAddrSet removes the ipset name; an absent set is no error. A set still matched by a
// rule cannot go (EBUSY): remove the rules first.
func DestroyAddrSet(name string) error {
	if err := netlink.IpsetDestroy(name); err != nil && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("removing ipset %s: %w", name, err)
	}
	return nil
}
