package cni

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
	"time"

	"github.com/vishvananda/netlink"
)

// WaitLink waits up to timeout for the link name to appear in the calling thread's netns.
// Links made by ovs-vswitchd (internal ports, bridges) appear a moment after the OVSDB
// transaction that asks for them commits.
func WaitLink(ctx context.Context, name string, timeout time.Duration) (netlink.Link, error) {
	deadline := time.Now().Add(timeout)
	for {
		link, err := netlink.LinkByName(name)
		if err == nil {
			return link, nil
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("%s did not appear within %s (is ovs-vswitchd running?): %w", name, timeout, err)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// ErrNoIPv6 is returned by SetDisableIPv6 when the netns has no IPv6 (kernel or sysctl).
var ErrNoIPv6 = errors.New("IPv6 is unavailable in this network namespace")

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
