package hostnet

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestEnableForwardingWithoutIPv6: forwarding is turned on in both families, and a kernel
// without IPv6 (no net/ipv6 in /proc/sys) is no error, while a missing IPv4 sysctl is.
func TestEnableForwardingWithoutIPv6(t *testing.T) {
	mk := func(files ...string) string {
		root := t.TempDir()
		for _, f := range files {
			if err := os.MkdirAll(filepath.Dir(filepath.Join(root, f)), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(root, f), []byte("0\n"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		return root
	}
	both := mk("ipv4/ip_forward", "ipv6/conf/all/forwarding")
	if err := enableForwarding(both); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"ipv4/ip_forward", "ipv6/conf/all/forwarding"} {
		if b, _ := os.ReadFile(filepath.Join(both, f)); string(b) != "1\n" {
			t.Errorf("%s = %q, want 1", f, b)
		}
	}
	if err := enableForwarding(mk("ipv4/ip_forward")); err != nil {
		t.Errorf("kernel without IPv6: %v", err)
	}
	if err := enableForwarding(mk("ipv6/conf/all/forwarding")); err == nil || !strings.Contains(err.Error(), "IPv4") {
		t.Errorf("no IPv4 forwarding sysctl: %v, want an IPv4 error", err)
	}
}
