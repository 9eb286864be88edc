package cni

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"strconv"

	"github.com/vishvananda/netns"
)

// Network namespaces are per OS thread. Code that must run inside a pod's namespace runs
// through withNetNS/inNetNS: on a goroutine of its own, locked to its thread, switched in
// and back. If switching back fails the goroutine exits still locked, which makes the Go
// runtime discard the thread, so no other goroutine ever runs in the wrong namespace.

// withNetNS runs fn inside the network namespace at path and switches back afterwards.
func withNetNS(path string, fn func() error) error {
	ns, err := netns.GetFromPath(path)
	if err != nil {
		return fmt.Errorf("%w: opening network namespace %s: %w", ErrInvalidNetNS, path, err)
	}
	defer ns.Close()
	return inNetNS(ns, fn)
}

// inNetNS runs fn inside the network namespace ns and switches back afterwards.
func inNetNS(ns netns.NsHandle, fn func() error) error {
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := netns.Get()
		if err != nil {
			done <- fmt.Errorf("getting the current network namespace: %w", err)
			return // still locked: the thread goes away with the goroutine
		}
		defer orig.Close()
		if err := netns.Set(ns); err != nil {
			runtime.UnlockOSThread()
			done <- fmt.Errorf("%w: entering network namespace: %w", ErrInvalidNetNS, err)
			return
		}
		fnErr := callRecovering(fn)
		if err := netns.Set(orig); err != nil {
			done <- errors.Join(fnErr, fmt.Errorf("switching back to the original network namespace: %w", err))
			return // still locked: the thread goes away with the goroutine
		}
		runtime.UnlockOSThread()
		done <- fnErr
	}()
	return <-done
}

// callRecovering calls fn, turning a panic into an error so the caller can switch back.
func callRecovering(fn func() error) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("panic inside network namespace: %v", p)
		}
	}()
	return fn()
}

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

// sameNetNS reports whether the namespaces at paths a and b are one namespace.
func sameNetNS(a, b string) (bool, error) {
	na, err := netns.GetFromPath(a)
	if err != nil {
		return false, err
	}
	defer na.Close()
	nb, err := netns.GetFromPath(b)
	if err != nil {
		return false, err
	}
	defer nb.Close()
	return na.Equal(nb), nil
}
