package servicenat

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kovn/kovn/pkg/hostnet"
	"github.com/kovn/kovn/pkg/hostnet/netnstest"
)

// TestNATRulesPerFamily: each family's chain text holds only that family's CIDRs, RETURN for
// every cluster destination of the family before the MASQUERADE, and a family with nothing
// to NAT still gets an (empty) chain, which is what flushes a subnet that stopped NATing.
func TestNATRulesPerFamily(t *testing.T) {
	nat := prefixes("fd00:10:16::/64", "10.16.0.0/16")
	cluster := prefixes("10.16.0.0/16", "fd00:10:16::/64", "100.64.0.0/16", "fd00:100:64::/112")
	for _, tc := range []struct {
		name      string
		is4       bool
		nat, want string
	}{
		{"IPv4", true, "", "*nat\n:KOVN-POSTROUTING - [0:0]\n" +
			"-A KOVN-POSTROUTING -s 10.16.0.0/16 -d 10.16.0.0/16 -j RETURN\n" +
			"-A KOVN-POSTROUTING -s 10.16.0.0/16 -d 100.64.0.0/16 -j RETURN\n" +
			"-A KOVN-POSTROUTING -s 10.16.0.0/16 -j MASQUERADE\nCOMMIT\n"},
		{"IPv6", false, "", "*nat\n:KOVN-POSTROUTING - [0:0]\n" +
			"-A KOVN-POSTROUTING -s fd00:10:16::/64 -d fd00:100:64::/112 -j RETURN\n" +
			"-A KOVN-POSTROUTING -s fd00:10:16::/64 -d fd00:10:16::/64 -j RETURN\n" +
			"-A KOVN-POSTROUTING -s fd00:10:16::/64 -j MASQUERADE\nCOMMIT\n"},
		{"IPv6 without natOutgoing subnets", false, "none", "*nat\n:KOVN-POSTROUTING - [0:0]\nCOMMIT\n"},
	} {
		n := nat
		if tc.nat == "none" {
			n = prefixes("10.16.0.0/16")
		}
		if got := natRules(tc.is4, n, cluster); got != tc.want {
			t.Errorf("%s:\n%s\nwant:\n%s", tc.name, got, tc.want)
		}
	}
}

func TestSyncNATRewritesItsChainOnly(t *testing.T) {
	netnstest.Do(t, func() {
		cluster := prefixes("10.16.0.0/16", "100.64.0.0/16", "fd00:10:16::/64", "fd00:100:64::/112")
		nat := prefixes("10.16.0.0/16", "fd00:10:16::/64")
		if out, err := exec.Command("iptables", "-t", "nat", "-A", "POSTROUTING", "-s", "192.0.2.0/24", "-j", "ACCEPT").CombinedOutput(); err != nil {
			t.Fatalf("seed a foreign rule: %v %s", err, out)
		}
		for i := 0; i < 2; i++ { // idempotent: a second sync leaves the same rules
			if err := SyncNAT(nat, cluster); err != nil {
				t.Fatal(err)
			}
		}
		for _, fam := range []struct {
			tool string
			want []string
		}{
			{"iptables", []string{
				"-A POSTROUTING -j KOVN-POSTROUTING",
				"-A POSTROUTING -s 192.0.2.0/24 -j ACCEPT",
				"-A KOVN-POSTROUTING -s 10.16.0.0/16 -d 10.16.0.0/16 -j RETURN",
				"-A KOVN-POSTROUTING -s 10.16.0.0/16 -d 100.64.0.0/16 -j RETURN",
				"-A KOVN-POSTROUTING -s 10.16.0.0/16 -j MASQUERADE",
			}},
			{"ip6tables", []string{
				"-A POSTROUTING -j KOVN-POSTROUTING",
				"-A KOVN-POSTROUTING -s fd00:10:16::/64 -d fd00:10:16::/64 -j RETURN",
				"-A KOVN-POSTROUTING -s fd00:10:16::/64 -d fd00:100:64::/112 -j RETURN",
				"-A KOVN-POSTROUTING -s fd00:10:16::/64 -j MASQUERADE",
			}},
		} {
			out, err := exec.Command(fam.tool, "-t", "nat", "-S").CombinedOutput()
			if err != nil {
				t.Fatalf("%v %s", err, out)
			}
			got := string(out)
			for _, want := range fam.want {
				if !strings.Contains(got, want) {
					t.Errorf("%s: missing %q in:\n%s", fam.tool, want, got)
				}
			}
			if n := strings.Count(got, "-j KOVN-POSTROUTING"); n != 1 {
				t.Errorf("%s: %d jumps to the kovn chain, want 1:\n%s", fam.tool, n, got)
			}
		}
		if err := SyncNAT(nil, cluster); err != nil { // no natOutgoing subnet left
			t.Fatal(err)
		}
		for _, tool := range []string{"iptables", "ip6tables"} {
			out, _ := exec.Command(tool, "-t", "nat", "-S", natChain).CombinedOutput()
			if strings.Contains(string(out), "MASQUERADE") {
				t.Errorf("%s: stale MASQUERADE rule after the subnet stopped NATing:\n%s", tool, out)
			}
		}
	})
}

// TestSyncNATNamesMissingIp6tables: a node asked to NAT IPv6 without ip6tables says which tool
// it lacks, and still programs IPv4; without IPv6 to NAT, a missing ip6tables is no error.
func TestSyncNATNamesMissingIp6tables(t *testing.T) {
	bin := t.TempDir()
	for _, tool := range []string{"iptables", "iptables-restore"} {
		path, err := exec.LookPath(tool)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(path, filepath.Join(bin, tool)); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("PATH", bin)
	// A node that never had ip6tables: a firewall of its own (the package's keeps the handles
	// earlier tests made with ip6tables on PATH).
	saved := hostFirewall
	hostFirewall = hostnet.NewFirewall()
	defer func() { hostFirewall = saved }()
	netnstest.Do(t, func() {
		cluster := prefixes("10.16.0.0/16", "fd00:10:16::/64")
		err := SyncNAT(prefixes("10.16.0.0/16", "fd00:10:16::/64"), cluster)
		if err == nil || !strings.Contains(err.Error(), "ip6tables") {
			t.Fatalf("IPv6 NAT without ip6tables: %v, want an error naming ip6tables", err)
		}
		out, _ := exec.Command("iptables", "-t", "nat", "-S", natChain).CombinedOutput()
		if !strings.Contains(string(out), "-s 10.16.0.0/16 -j MASQUERADE") {
			t.Errorf("IPv4 rules not written while IPv6 failed:\n%s", out)
		}
		if err := SyncNAT(prefixes("10.16.0.0/16"), cluster); err != nil {
			t.Errorf("IPv4-only NAT on a node without ip6tables: %v", err)
		}
	})
}
