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

// TestSyncChainChangesOnlyTheDifferences, in a throwaway netns: a sync adds, removes and
// reorders rules to match; a rule that stays (rules inserted before it) is not rewritten, as
// its packet counters survive;
// kovn's jump stays first in the built-in chain; someone else's rules stay.
func TestSyncChainChangesOnlyTheDifferences(t *testing.T) {
	ns, fw := newNetNS(t), NewFirewall()
	rule := func(s string) []string { return RuleFields(s) }
	steps := [][]string{
		{"-s 10.0.0.0/8 -j RETURN", "-p tcp --dport 80 -m comment --comment \"ns/web:http\" -j MASQUERADE", "-s 10.1.0.0/16 -j MASQUERADE"},
		{"-s 10.0.0.0/8 -j RETURN", "-d 192.0.2.1/32 -j RETURN", "-p tcp --dport 80 -m comment --comment \"ns/web:http\" -j MASQUERADE"},
		{"-p tcp --dport 80 -m comment --comment \"ns/web:http\" -j MASQUERADE", "-s 10.0.0.0/8 -j RETURN"},
		{},
	}
	var listed []string
	err := inFamily(t, fw, ns, func(ff *FirewallFamily) error {
		if err := ff.EnsureChain("nat", "KOVN-TEST"); err != nil {
			return err
		}
		if out, err := exec.Command("iptables", "-t", "nat", "-A", "POSTROUTING", "-s", "198.51.100.0/24", "-j", "ACCEPT").CombinedOutput(); err != nil {
			t.Fatalf("a foreign rule: %v %s", err, out)
		}
		for i := 0; i < 2; i++ { // the second EnsureJump finds the jump and leaves it first
			if err := ff.EnsureJump("nat", "POSTROUTING", "KOVN-TEST"); err != nil {
				return err
			}
		}
		for n, step := range steps {
			var rules [][]string
			for _, r := range step {
				rules = append(rules, rule(r))
			}
			if err := ff.SyncChain("nat", "KOVN-TEST", rules); err != nil {
				return err
			}
			got, err := ff.Rules("nat", "KOVN-TEST")
			if err != nil {
				return err
			}
			checkSynced(t, n, got, step)
			switch n {
			case 0: // give the rule step 1 keeps counters of its own
				if out, err := exec.Command("iptables", append([]string{"-t", "nat", "-R", "KOVN-TEST", "2"},
					append(rule(steps[0][1]), "-c", "7", "700")...)...).CombinedOutput(); err != nil {
					t.Fatalf("setting counters: %v %s", err, out)
				}
			case 1:
				out, _ := exec.Command("iptables", "-t", "nat", "-v", "-S", "KOVN-TEST").CombinedOutput()
				if !strings.Contains(string(out), "ns/web:http\" -c 7 700") {
					t.Errorf("the kept rule was rewritten (its counters are gone):\n%s", out)
				}
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

// checkSynced compares a chain's listing with the rules of step n, word by word after the
// normalisation iptables does (it adds "-m tcp" and writes comments quoted).
func checkSynced(t *testing.T, n int, got, want []string) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("step %d: chain %q, want %d rules %q", n, got, len(want), want)
	}
	for i, w := range want {
		g := strings.Join(RuleFields(strings.TrimPrefix(got[i], "-A KOVN-TEST ")), " ")
		for _, word := range RuleFields(w) {
			if !strings.Contains(" "+g+" ", " "+word+" ") {
				t.Errorf("step %d rule %d = %q, want %q", n, i+1, got[i], w)
				break
			}
		}
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
