package hostnet

import (
	"errors"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/kovn/kovn/pkg/hostnet/netnstest"
)

// TestSyncAddrSet, in a throwaway netns: the set is created on first use, then holds exactly
// the addresses of its family after each sync; a set of another family is an error, not
// rewritten; destroying an absent set is fine.
func TestSyncAddrSet(t *testing.T) {
	netnstest.Do(t, func() {
		a := netip.MustParseAddr
		members := func(name string) []string {
			t.Helper()
			got, err := addrSetMembers(name)
			if err != nil {
				t.Fatal(err)
			}
			var out []string
			for _, m := range got {
				out = append(out, m.String())
			}
			slices.Sort(out)
			return out
		}
		if got := members("KOVN-TEST4"); len(got) != 0 {
			t.Fatalf("absent set: %v", got)
		}
		if err := SyncAddrSet("KOVN-TEST4", true, []netip.Addr{a("10.16.0.5"), a("10.16.0.6"), a("fd00::5")}); err != nil {
			t.Fatal(err)
		}
		if got := members("KOVN-TEST4"); !slices.Equal(got, []string{"10.16.0.5", "10.16.0.6"}) {
			t.Errorf("after the first sync: %v", got)
		}
		if err := SyncAddrSet("KOVN-TEST4", true, []netip.Addr{a("10.16.0.6"), a("10.16.0.7")}); err != nil {
			t.Fatal(err)
		}
		if got := members("KOVN-TEST4"); !slices.Equal(got, []string{"10.16.0.6", "10.16.0.7"}) {
			t.Errorf("after the second sync: %v", got)
		}
		if err := SyncAddrSet("KOVN-TEST6", false, []netip.Addr{a("fd00::5"), a("10.16.0.5")}); err != nil {
			t.Fatal(err)
		}
		if got := members("KOVN-TEST6"); !slices.Equal(got, []string{"fd00::5"}) {
			t.Errorf("IPv6 set: %v", got)
		}
		if err := SyncAddrSet("KOVN-TEST6", true, nil); err == nil || !strings.Contains(err.Error(), "family") {
			t.Errorf("an IPv6 set synced as IPv4: %v, want a family error", err)
		}
		if names, err := AddrSetNames("KOVN-TEST"); err != nil || !slices.Equal(names, []string{"KOVN-TEST4", "KOVN-TEST6"}) {
			t.Errorf("set names %v %v", names, err)
		}
		for _, n := range []string{"KOVN-TEST4", "KOVN-TEST6", "KOVN-TEST-ABSENT"} {
			if err := DestroyAddrSet(n); err != nil {
				t.Error(err)
			}
		}
		if got := members("KOVN-TEST4"); len(got) != 0 {
			t.Errorf("destroyed set: %v", got)
		}
	})
}

// addrSetMembers are the addresses in the ipset name; an absent set has none.
func addrSetMembers(name string) ([]netip.Addr, error) {
	set, err := netlink.IpsetList(name)
	if errors.Is(err, unix.ENOENT) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []netip.Addr
	for _, e := range set.Entries {
		if a, ok := netip.AddrFromSlice(e.IP); ok {
			out = append(out, a.Unmap())
		}
	}
	return out, nil
}
