package bootstrap

import (
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/kovn/kovn/pkg/hostnet/netnstest"
)

// TestSetAddrsIPv6NotTentative: ovn0's IPv6 join address is usable the moment it is added (no
// duplicate address detection holding it "tentative"), on a link that is up with a live peer,
// where the kernel would otherwise run DAD for about a second. IPv6 disabled on the link (as
// some node images do for new interfaces) is turned back on, and router advertisements (the
// join router port answers solicitations) are ignored.
func TestSetAddrsIPv6NotTentative(t *testing.T) {
	netnstest.Do(t, func() {
		for _, args := range [][]string{
			{"link", "add", "kv-ovn0", "type", "veth", "peer", "name", "kv-peer"},
			{"link", "set", "kv-ovn0", "up"},
			{"link", "set", "kv-peer", "up"},
		} {
			if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
				t.Fatalf("ip %v: %v %s", args, err, out)
			}
		}
		// kv-ovn0 exists only in the throwaway namespace: a sysctl written here cannot be the host's.
		sysctl := func(name string) string { return "/proc/sys/net/ipv6/conf/kv-ovn0/" + name }
		if err := os.WriteFile(sysctl("disable_ipv6"), []byte("1"), 0o644); err != nil {
			t.Fatal(err)
		}
		link, err := netlink.LinkByName("kv-ovn0")
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 2; i++ { // idempotent: the daemon re-applies on every sync
			if err := setAddrs(link, prefixes("100.64.0.2/16", "fd00:100:64::2/112")); err != nil {
				t.Fatal(err)
			}
		}
		if ra, err := os.ReadFile(sysctl("accept_ra")); err != nil || strings.TrimSpace(string(ra)) != "0" {
			t.Errorf("accept_ra on ovn0 = %q (%v), want 0", ra, err)
		}
		addrs, err := netlink.AddrList(link, netlink.FAMILY_ALL)
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{"100.64.0.2/16", "fd00:100:64::2/112"} {
			if !slices.ContainsFunc(addrs, func(a netlink.Addr) bool {
				return a.IPNet.String() == want && a.Flags&unix.IFA_F_TENTATIVE == 0
			}) {
				t.Errorf("ovn0 lacks usable (non-tentative) address %s; has %v", want, addrs)
			}
		}
	})
}

// TestSetAddrsRecoversFailedDAD: a join address that duplicate address detection marked failed
// (here: the peer held it for a moment) is usable after the next sync; replacing it in place
// would keep it "dadfailed" for good.
func TestSetAddrsRecoversFailedDAD(t *testing.T) {
	netnstest.Do(t, func() {
		ip := netnstest.IPCmd(t)
		ip("link", "add", "kv-ovn0", "type", "veth", "peer", "name", "kv-peer")
		ip("link", "set", "kv-ovn0", "up")
		ip("link", "set", "kv-peer", "up")
		ip("addr", "add", "fd00:100:64::2/112", "dev", "kv-peer", "nodad")
		ip("addr", "add", "fd00:100:64::2/112", "dev", "kv-ovn0") // with DAD: the peer answers
		for deadline := time.Now().Add(5 * time.Second); !strings.Contains(ip("-6", "addr", "show", "dev", "kv-ovn0"), "dadfailed"); {
			if time.Now().After(deadline) {
				t.Fatalf("DAD did not fail on kv-ovn0:\n%s", ip("-6", "addr", "show", "dev", "kv-ovn0"))
			}
			time.Sleep(50 * time.Millisecond)
		}
		ip("addr", "del", "fd00:100:64::2/112", "dev", "kv-peer") // the conflict is gone
		link, err := netlink.LinkByName("kv-ovn0")
		if err != nil {
			t.Fatal(err)
		}
		if err := setAddrs(link, prefixes("fd00:100:64::2/112")); err != nil {
			t.Fatal(err)
		}
		addrs, err := netlink.AddrList(link, netlink.FAMILY_V6)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.ContainsFunc(addrs, func(a netlink.Addr) bool {
			return a.IPNet.String() == "fd00:100:64::2/112" && a.Flags&(unix.IFA_F_TENTATIVE|unix.IFA_F_DADFAILED) == 0
		}) {
			t.Errorf("after the sync, fd00:100:64::2/112 is still not usable:\n%s", ip("-6", "addr", "show", "dev", "kv-ovn0"))
		}
	})
}
