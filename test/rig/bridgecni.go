package rig

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
)

// Bridge nodes run the plain containernetworking bridge + host-local plugins (Debian's
// containernetworking-plugins) instead of kovn-cni: the yardstick a benchmark compares kovn's
// pod start-up with on the same rig. The bridge lives in the node's own netns, so nothing
// on the host changes; pods get an address on it and nothing more (no masquerade, no routes
// to other nodes), which is all a start-up comparison needs.

// bridgePlugins are the plugin binaries a bridge node needs, linked into the rig's CNI bin dir.
var bridgePlugins = []string{"/usr/lib/cni/bridge", "/usr/lib/cni/host-local"}

// BridgePodCIDR is the host-local range of bridge node n of cluster cl (10.241.n.0/24 for c1),
// outside every kovn subnet and service range.
func BridgePodCIDR(cl, n int) netip.Prefix {
	return netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(240 + cl), byte(n), 0}), 24)
}

// bridgeConflist is the CNI network configuration of a bridge node.
func bridgeConflist(cl, n int) ([]byte, error) {
	conf := map[string]any{
		"cniVersion": "1.0.0",
		"name":       "bridge",
		"plugins": []any{map[string]any{
			"type": "bridge", "bridge": "cni0", "isGateway": true, "ipMasq": false, "mtu": 1400,
			"ipam": map[string]any{
				"type":   "host-local",
				"ranges": [][]map[string]string{{{"subnet": BridgePodCIDR(cl, n).String()}}},
			},
		}},
	}
	return json.MarshalIndent(conf, "", "  ")
}

// writeBridgeConf puts the bridge conflist where the node's /etc/cni/net.d is bind-mounted from.
func (c Config) writeBridgeConf(cl, n int) error {
	b, err := bridgeConflist(cl, n)
	if err != nil {
		return err
	}
	dir := filepath.Join(c.NodeDir(cl, n), "cni-netd")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "10-bridge.conflist"), b, 0o644)
}

// linkBridgePlugins makes the bridge plugins available to containerd beside kovn-cni.
func (c Config) linkBridgePlugins() error {
	for _, p := range bridgePlugins {
		dst := filepath.Join(c.cniBinDir(), filepath.Base(p))
		if _, err := os.Lstat(dst); err == nil {
			continue
		}
		if err := os.Symlink(p, dst); err != nil {
			return fmt.Errorf("link CNI plugin %s: %w", p, err)
		}
	}
	return nil
}
