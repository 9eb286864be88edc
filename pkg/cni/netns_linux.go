package cni

import (
	"context"
	"os"
	"strconv"
)

// podNetnsPath returns the path under which the daemon can open the pod's netns.
// CNI_NETNS is a path in the mount namespace of the shim (the runtime's), which need not
// be the daemon's: when the Server saw the shim's pid, the path is resolved through
// /proc/<pid>/root, i.e. in the shim's mount namespace, as long as the shim waits for the
// answer (it does). Otherwise the path is used as is.
func podNetnsPath(ctx context.Context, netnsPath string) string {
	pid, ok := PeerPID(ctx)
	if !ok || netnsPath == "" || netnsPath[0] != '/' {
		return netnsPath
	}
	viaShim := "/proc/" + strconv.Itoa(pid) + "/root" + netnsPath
	if _, err := os.Stat(viaShim); err == nil {
		return viaShim
	}
	return netnsPath
}
