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

// delegatePlugins are what kovn-daemon may call for attachment networks: the delegates and
// the static IPAM that carries kovn's addresses to them (`make build` builds them static from
// github.com/containernetworking/plugins into KovnBinDir/cni-plugins).
var delegatePlugins = []string{"macvlan", "ipvlan", "bridge", "host-device", "static"}

// delegatePluginPaths are delegatePlugins as `make build` left them.
func (c Config) delegatePluginPaths() []string {
	var out []string
	for _, p := range delegatePlugins {
		out = append(out, filepath.Join(c.KovnBinDir, "cni-plugins", p))
	}
	return out
}

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

// linkPlugins makes plugins available to containerd and kovn-daemon beside kovn-cni.
// The first of two plugins with one name wins; a link left pointing elsewhere (a rig directory
// of an older kovn) is replaced.
func (c Config) linkPlugins(plugins []string) error {
	done := map[string]bool{}
	for _, p := range plugins {
		name := filepath.Base(p)
		if done[name] {
			continue
		}
		done[name] = true
		dst := filepath.Join(c.cniBinDir(), name)
		if target, err := os.Readlink(dst); err == nil && target == p {
			continue
		}
		if err := os.Remove(dst); err != nil && !os.IsNotExist(err) {
			return fmt.Errorf("replace CNI plugin %s: %w", dst, err)
		}
		if err := os.Symlink(p, dst); err != nil {
			return fmt.Errorf("link CNI plugin %s: %w", p, err)
		}
	}
	return nil
}
