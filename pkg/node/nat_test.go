package node

import (
	"net/netip"
	"os/exec"
	"runtime"
	"strings"
	"testing"

	"github.com/vishvananda/netns"
)

// inThrowawayNetNS runs fn on a thread moved into a new network namespace (root only), so the
// iptables rules it writes never touch the test host's.
func inThrowawayNetNS(t *testing.T, fn func()) {
	t.Helper()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	orig, err := netns.Get()
	if err != nil {
		t.Fatal(err)
	}
	defer orig.Close()
	ns, err := netns.New() // also switches this thread into it
	if err != nil {
		t.Fatalf("new netns (tests run as root): %v", err)
	}
	defer func() {
		if err := netns.Set(orig); err != nil {
			t.Fatalf("back to the original netns: %v", err)
		}
		ns.Close()
	}()
	fn()
}

func TestSyncNATRewritesItsChainOnly(t *testing.T) {
	inThrowawayNetNS(t, func() {
		cluster := []netip.Prefix{netip.MustParsePrefix("10.16.0.0/16"), netip.MustParsePrefix("100.64.0.0/16")}
		nat := []netip.Prefix{netip.MustParsePrefix("10.16.0.0/16"), netip.MustParsePrefix("fd00::/64")}
		if out, err := exec.Command("iptables", "-t", "nat", "-A", "POSTROUTING", "-s", "192.0.2.0/24", "-j", "ACCEPT").CombinedOutput(); err != nil {
			t.Fatalf("seed a foreign rule: %v %s", err, out)
		}
		for i := 0; i < 2; i++ { // idempotent: a second sync leaves the same rules
			if err := SyncNAT(nat, cluster); err != nil {
				t.Fatal(err)
			}
		}
		out, err := exec.Command("iptables", "-t", "nat", "-S").CombinedOutput()
		if err != nil {
			t.Fatalf("%v %s", err, out)
		}
		got := string(out)
		for _, want := range []string{
			"-A POSTROUTING -j KOVN-POSTROUTING",
			"-A POSTROUTING -s 192.0.2.0/24 -j ACCEPT",
			"-A KOVN-POSTROUTING -s 10.16.0.0/16 -d 10.16.0.0/16 -j RETURN",
			"-A KOVN-POSTROUTING -s 10.16.0.0/16 -d 100.64.0.0/16 -j RETURN",
			"-A KOVN-POSTROUTING -s 10.16.0.0/16 -j MASQUERADE",
		} {
			if !strings.Contains(got, want) {
				t.Errorf("missing %q in:\n%s", want, got)
			}
		}
		if n := strings.Count(got, "-j KOVN-POSTROUTING"); n != 1 {
			t.Errorf("%d jumps to the kovn chain, want 1:\n%s", n, got)
		}
		if err := SyncNAT(nil, cluster); err != nil { // no natOutgoing subnet left
			t.Fatal(err)
		}
		out, _ = exec.Command("iptables", "-t", "nat", "-S", natChain).CombinedOutput()
		if strings.Contains(string(out), "MASQUERADE") {
			t.Errorf("stale MASQUERADE rule after the subnet stopped NATing:\n%s", out)
		}
	})
}
