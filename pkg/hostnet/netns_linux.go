package hostnet

import (
	"errors"
	"fmt"
	"runtime"

	"github.com/vishvananda/netns"
)

// Network namespaces are per OS thread. Code that must run inside a pod's namespace runs
// through WithNetNS/InNetNS: on a goroutine of its own, locked to its thread, switched in
// and back. If switching back fails the goroutine exits still locked, which makes the Go
// runtime discard the thread, so no other goroutine ever runs in the wrong namespace.

// WithNetNS runs fn inside the network namespace at path and switches back afterwards.
func WithNetNS(path string, fn func() error) error {
	ns, err := netns.GetFromPath(path)
	if err != nil {
		return fmt.Errorf("%w: opening network namespace %s: %w", ErrInvalidNetNS, path, err)
	}
	defer ns.Close()
	return InNetNS(ns, fn)
}

// InNetNS runs fn inside the network namespace ns and switches back afterwards.
func InNetNS(ns netns.NsHandle, fn func() error) error {
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

// SameNetNS reports whether the namespaces at paths a and b are one namespace.
func SameNetNS(a, b string) (bool, error) {
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
