// Package netnstest makes throwaway network namespaces for tests that plumb links, routes
// and firewall rules without touching the host's own.
package netnstest

import (
	"fmt"
	"os"
	"runtime"
	"testing"

	"github.com/vishvananda/netns"
)

// Making a namespace needs root (CAP_SYS_ADMIN and CAP_NET_ADMIN), which `make test` has.
// Each namespace is referenced by nothing but an open file descriptor,
// so closing it at the end of the test destroys the namespace and every link in it.

// New creates a throwaway network namespace and returns a path that opens it
// (/proc/<pid>/fd/<fd>).
func New(t testing.TB) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Fatal("this test creates network namespaces and must run as root (sudo go test)")
	}
	type created struct {
		ns  netns.NsHandle
		err error
	}
	ch := make(chan created, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := netns.Get()
		if err != nil {
			ch <- created{err: err}
			return
		}
		defer orig.Close()
		ns, err := netns.New() // unshares: the thread is now in ns
		if err != nil {
			runtime.UnlockOSThread()
			ch <- created{err: err}
			return
		}
		if err := netns.Set(orig); err != nil {
			ch <- created{err: err} // the thread stays locked and dies with this goroutine
			return
		}
		runtime.UnlockOSThread()
		ch <- created{ns: ns}
	}()
	c := <-ch
	if c.err != nil {
		t.Fatalf("creating a network namespace: %v", c.err)
	}
	t.Cleanup(func() { _ = c.ns.Close() })
	return fmt.Sprintf("/proc/%d/fd/%d", os.Getpid(), int(c.ns))
}
