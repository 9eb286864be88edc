package hostnet

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// inFamily runs fn with the IPv4 handle of fw inside the namespace at ns.
func inFamily(t *testing.T, fw *Firewall, ns string, fn func(ff *FirewallFamily) error) error {
	t.Helper()
	return WithNetNS(ns, func() error {
		ff, err := fw.Family(true)
		if err != nil {
			return err
		}
		return fn(ff)
	})
}

// TestEnsureJumpFirstAndOnce, in a throwaway netns: kovn's jump goes first in the built-in
// chain, ahead of someone else's rule, and a second call finds it and adds no other.
func TestEnsureJumpFirstAndOnce(t *testing.T) {
	ns, fw := newNetNS(t), NewFirewall()
	var listed []string
	err := inFamily(t, fw, ns, func(ff *FirewallFamily) error {
		if err := ff.EnsureChain("nat", "KOVN-TEST"); err != nil {
			return err
		}
		if out, err := exec.Command("iptables", "-t", "nat", "-A", "POSTROUTING", "-s", "198.51.100.0/24", "-j", "ACCEPT").CombinedOutput(); err != nil {
			t.Fatalf("a foreign rule: %v %s", err, out)
		}
		for i := 0; i < 2; i++ {
			if err := ff.EnsureJump("nat", "POSTROUTING", "KOVN-TEST"); err != nil {
				return err
			}
		}
		var err error
		listed, err = ff.Rules("nat", "POSTROUTING")
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"-A POSTROUTING -j KOVN-TEST", "-A POSTROUTING -s 198.51.100.0/24 -j ACCEPT"}; !slices.Equal(listed, want) {
		t.Errorf("POSTROUTING = %q, want %q (one jump, first)", listed, want)
	}
}

// TestFirewallWaitsForTheXtablesLock: while someone else holds the xtables lock, a firewall
// change waits instead of failing, and goes through once the lock is released. The nft
// backend takes no lock (run with iptables-nft this test fails: the change returns at once),
// so the test drives iptables-legacy, which honours XTABLES_LOCKFILE: the lock is a private
// file, never the host's, and the chain is made in a throwaway netns.
func TestFirewallWaitsForTheXtablesLock(t *testing.T) {
	legacy, err := exec.LookPath("iptables-legacy")
	if err != nil {
		t.Fatalf("this test needs iptables-legacy (Debian/Ubuntu: apt-get install iptables): %v", err)
	}
	lockPath := filepath.Join(t.TempDir(), "xtables.lock")
	t.Setenv("XTABLES_LOCKFILE", lockPath)
	lock, err := os.OpenFile(lockPath, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close()
	if err := unix.Flock(int(lock.Fd()), unix.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	ns, fw := newNetNS(t), NewFirewall(IptablesPaths(legacy, ""))
	done := make(chan error, 1)
	go func() {
		done <- inFamily(t, fw, ns, func(ff *FirewallFamily) error { return ff.EnsureChain("filter", "KOVN-LOCKED") })
	}()
	select {
	case err := <-done:
		t.Fatalf("the change returned while the xtables lock was held (error: %v); it must wait", err)
	case <-time.After(300 * time.Millisecond):
	}
	if err := unix.Flock(int(lock.Fd()), unix.LOCK_UN); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("after the lock was released: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the change did not go through within 10 s of the lock's release")
	}
	var chains []string
	if err := inFamily(t, fw, ns, func(ff *FirewallFamily) (err error) { chains, err = ff.Chains("filter"); return err }); err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(chains, "KOVN-LOCKED") {
		t.Errorf("filter chains %q lack KOVN-LOCKED", chains)
	}
}

// TestFamilyRunsTheToolsVersionOnce: the handle of a family is made once (go-iptables runs
// `<tool> --version` to make it), not on every sync; a missing tool is tried again each time.
func TestFamilyRunsTheToolsVersionOnce(t *testing.T) {
	real, err := exec.LookPath("iptables")
	if err != nil {
		t.Fatalf("this test needs iptables (Debian/Ubuntu: apt-get install iptables): %v", err)
	}
	dir := t.TempDir()
	calls := filepath.Join(dir, "calls")
	wrapper := filepath.Join(dir, "iptables")
	script := "#!/bin/sh\necho \"$*\" >> " + calls + "\nexec " + real + " \"$@\"\n"
	if err := os.WriteFile(wrapper, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	ns, fw := newNetNS(t), NewFirewall(IptablesPaths(wrapper, filepath.Join(dir, "missing-ip6tables")))
	for i := 0; i < 3; i++ {
		if err := inFamily(t, fw, ns, func(ff *FirewallFamily) error { return ff.EnsureChain("filter", "KOVN-ONCE") }); err != nil {
			t.Fatal(err)
		}
	}
	b, _ := os.ReadFile(calls)
	if n := strings.Count(string(b), "--version"); n != 1 {
		t.Errorf("the tool ran --version %d times over 3 uses, want 1:\n%s", n, b)
	}
	for i := 0; i < 2; i++ {
		if _, err := fw.Family(false); err == nil || !strings.Contains(err.Error(), "missing-ip6tables") {
			t.Errorf("a missing tool: error %v, want one naming it", err)
		}
	}
}

// TestReplaceChainsIsOneTransaction, in a throwaway netns: the declared chains hold exactly
// the new rules (one created), someone else's chain and rules stay, and input iptables refuses
// changes nothing (all or nothing).
func TestReplaceChainsIsOneTransaction(t *testing.T) {
	ns, fw := newNetNS(t), NewFirewall()
	err := inFamily(t, fw, ns, func(ff *FirewallFamily) error {
		setup := "iptables -t nat -N KOVN-A && iptables -t nat -A KOVN-A -s 10.0.0.1 -j RETURN && " +
			"iptables -t nat -N OTHER && iptables -t nat -A OTHER -j RETURN && iptables -t nat -A POSTROUTING -s 10.9.9.9 -j ACCEPT"
		if out, err := exec.Command("sh", "-c", setup).CombinedOutput(); err != nil {
			t.Fatalf("setup: %v %s", err, out)
		}
		chains := []ChainRules{
			{Table: "nat", Chain: "KOVN-A", Rules: [][]string{RuleFields(`-s 10.0.0.5/32 -m comment --comment "ns/web:http" -j RETURN`), RuleFields("-j KOVN-B")}},
			{Table: "nat", Chain: "KOVN-B", Rules: [][]string{RuleFields("-s 10.0.0.6/32 -j RETURN")}},
		}
		if err := ff.ReplaceChains("nat", chains); err != nil {
			return err
		}
		want := "-N KOVN-A\n-N KOVN-B\n-N OTHER\n-A POSTROUTING -s 10.9.9.9/32 -j ACCEPT\n" +
			"-A KOVN-A -s 10.0.0.5/32 -m comment --comment \"ns/web:http\" -j RETURN\n-A KOVN-A -j KOVN-B\n" +
			"-A KOVN-B -s 10.0.0.6/32 -j RETURN\n-A OTHER -j RETURN"
		if got := userRules(t); got != want {
			t.Errorf("after the replacement:\n%s\nwant:\n%s", got, want)
		}
		bad := []ChainRules{{Table: "nat", Chain: "KOVN-A", Rules: [][]string{RuleFields("-j RETURN"), RuleFields("-j NO-SUCH-CHAIN")}}}
		if err := ff.ReplaceChains("nat", bad); err == nil || !strings.Contains(err.Error(), "NO-SUCH-CHAIN") {
			t.Errorf("a refused rule: error %v, want iptables-restore's naming the chain", err)
		}
		if got := userRules(t); got != want {
			t.Errorf("after a refused replacement (must change nothing):\n%s\nwant:\n%s", got, want)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// userRules is the nat table's listing without the built-in chains' policies.
func userRules(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("iptables", "-t", "nat", "-S").CombinedOutput()
	if err != nil {
		t.Fatalf("iptables -S: %v %s", err, out)
	}
	var lines []string
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if !strings.HasPrefix(l, "-P ") {
			lines = append(lines, l)
		}
	}
	return strings.Join(lines, "\n")
}
