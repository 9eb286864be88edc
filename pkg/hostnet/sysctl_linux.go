package hostnet

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// KernelHasIPv6 reports whether this kernel has IPv6 at all (not booted with ipv6.disable=1).
func KernelHasIPv6() bool {
	_, err := os.Stat("/proc/sys/net/ipv6")
	return !errors.Is(err, fs.ErrNotExist)
}

// EnableForwarding turns on IPv4/IPv6 forwarding in this network namespace: kovn-daemon's ovn0
// routes pod traffic out of the node.
func EnableForwarding() error { return enableForwarding("/proc/sys/net") }

// enableForwarding writes the forwarding sysctls under root (/proc/sys/net). A kernel booted
// without IPv6 (ipv6.disable=1) has no net/ipv6 at all: an IPv4-only node is fine without it,
// and an IPv6 subnet on such a node fails where its addresses are added, naming the cause.
func enableForwarding(root string) error {
	if err := os.WriteFile(filepath.Join(root, "ipv4/ip_forward"), []byte("1\n"), 0o644); err != nil {
		return fmt.Errorf("enable IPv4 forwarding: %w", err)
	}
	if _, err := os.Stat(filepath.Join(root, "ipv6")); errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err := os.WriteFile(filepath.Join(root, "ipv6/conf/all/forwarding"), []byte("1\n"), 0o644); err != nil {
		return fmt.Errorf("enable IPv6 forwarding: %w", err)
	}
	return nil
}

// IgnoreRouterAdvertisements sets accept_ra=0 on ifName (calling thread's netns), so an
// interface facing a router that answers solicitations never gives the node a default route.
func IgnoreRouterAdvertisements(ifName string) error {
	path := "/proc/sys/net/ipv6/conf/" + ifName + "/accept_ra"
	if err := os.WriteFile(path, []byte("0"), 0o644); err != nil {
		return fmt.Errorf("ignore router advertisements on %s: %w", ifName, err)
	}
	return nil
}

// SetDisableIPv6 writes disable_ipv6 of ifName (calling thread's netns) unless it already
// holds the wanted value.
func SetDisableIPv6(ifName string, disable bool) error {
	path := "/proc/sys/net/ipv6/conf/" + ifName + "/disable_ipv6"
	cur, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("%s: %w", ifName, ErrNoIPv6)
	}
	if err != nil {
		return fmt.Errorf("reading disable_ipv6 of %s: %w", ifName, err)
	}
	want := map[bool]string{true: "1", false: "0"}[disable]
	if strings.TrimSpace(string(cur)) == want {
		return nil
	}
	if err := os.WriteFile(path, []byte(want), 0o644); err != nil {
		return fmt.Errorf("setting disable_ipv6=%s on %s: %w", want, ifName, err)
	}
	return nil
}

// EnableIPv6 clears disable_ipv6 on ifName (calling thread's netns), which some runtimes and
// node images set by default; adding an IPv6 address would fail otherwise.
func EnableIPv6(ifName string) error {
	if err := SetDisableIPv6(ifName, false); err != nil {
		return fmt.Errorf("%s needs an IPv6 address: %w", ifName, err)
	}
	return nil
}
