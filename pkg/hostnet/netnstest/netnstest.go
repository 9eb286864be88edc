// Package netnstest makes throwaway network namespaces for tests that plumb links, routes
// and firewall rules without touching the host's own.
package netnstest

import (
	"fmt"
	"os"
	"os/exec"
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

// Do runs fn on the calling goroutine's thread moved into a new network namespace (root
// only), so the links, routes and packet filter rules fn makes never touch the test host's;
// the thread goes back to its namespace afterwards and the new one disappears.
func Do(t testing.TB, fn func()) {
	t.Helper()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	orig, err := netns.Get()
	if err != nil {
		t.Fatal(err)
	}
	defer orig.Close()
	ns, err := netns.New() // also switches this thread into it
	if err != nil {
		t.Fatalf("new netns (tests run as root): %v", err)
	}
	defer func() {
		if err := netns.Set(orig); err != nil {
			t.Fatalf("back to the original netns: %v", err)
		}
		ns.Close()
	}()
	fn()
}

// IPCmd returns an iproute2 runner (in the calling thread's netns) that fails the test on error.
func IPCmd(t testing.TB) func(args ...string) string {
	return func(args ...string) string {
		t.Helper()
		out, err := exec.Command("ip", args...).CombinedOutput()
		if err != nil {
			t.Fatalf("ip %v: %v %s", args, err, out)
		}
		return string(out)
	}
}
