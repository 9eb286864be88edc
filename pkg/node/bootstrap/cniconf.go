package bootstrap

import (
	"fmt"
	"os"
	"path/filepath"
)

// CNIConfigFile is the conflist kovn-daemon writes once the node is plumbed.
const CNIConfigFile = "00-kovn.conflist"

// WriteCNIConfig writes the CNI network config atomically; its presence makes kubelet report
// the node Ready, so it is written only after ovn0 and routes are up. It declares no
// capabilities on purpose: hostPorts are published by the daemon from the Pod objects
// (HostPortReconciler), so the runtime's portMappings are not needed, and no portmap plugin
// follows kovn-cni.
func WriteCNIConfig(dir, socket string, mtu int) error {
	conf := fmt.Sprintf(`{
  "cniVersion": "1.0.0",
  "name": "kovn",
  "plugins": [
    {"type": "kovn-cni", "serverSocket": %q, "mtu": %d}
  ]
}
`, socket, mtu)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	path := filepath.Join(dir, CNIConfigFile)
	if cur, err := os.ReadFile(path); err == nil && string(cur) == conf {
		return nil
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(conf), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
