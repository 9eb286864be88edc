package cni

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/vishvananda/netns"
)

// These tests need root (CAP_SYS_ADMIN and CAP_NET_ADMIN), which `make test` has. They only
// touch namespaces they create: each is referenced by nothing but an open file descriptor,
// so closing it at the end of the test destroys the namespace and every link in it.

// newNetNS creates a throwaway network namespace and returns a path that opens it
// (/proc/<pid>/fd/<fd>).
func newNetNS(t *testing.T) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Fatal("this test creates network namespaces and must run as root (sudo go test ./pkg/cni/...)")
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

// inNetNSOf reports whether a fresh goroutine's thread is in the namespace at want.
func inNetNSOf(t *testing.T, want string) bool {
	t.Helper()
	ch := make(chan bool, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		cur, err := netns.Get()
		if err != nil {
			ch <- false
			return
		}
		defer cur.Close()
		w, err := netns.GetFromPath(want)
		if err != nil {
			ch <- false
			return
		}
		defer w.Close()
		ch <- cur.Equal(w)
	}()
	return <-ch
}

func TestWithNetNS(t *testing.T) {
	target := newNetNS(t)
	if inNetNSOf(t, target) {
		t.Fatal("a fresh namespace equals the test's own")
	}
	var inside bool
	if err := withNetNS(target, func() error {
		cur, err := netns.Get()
		if err != nil {
			return err
		}
		defer cur.Close()
		w, err := netns.GetFromPath(target)
		if err != nil {
			return err
		}
		defer w.Close()
		inside = cur.Equal(w)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if !inside {
		t.Error("fn did not run inside the target namespace")
	}

	boom := errors.New("boom")
	if err := withNetNS(target, func() error { return boom }); !errors.Is(err, boom) {
		t.Errorf("fn's error = %v, want boom", err)
	}
	if err := withNetNS(target, func() error { panic("inside") }); err == nil || !strings.Contains(err.Error(), "panic") {
		t.Errorf("a panicking fn gave %v, want an error", err)
	}
	if err := withNetNS(filepath.Join(t.TempDir(), "gone"), func() error { return nil }); !errors.Is(err, ErrInvalidNetNS) {
		t.Errorf("missing netns: %v, want ErrInvalidNetNS", err)
	}
	// Every thread went back: goroutines keep running in the test's namespace.
	for range 20 {
		if inNetNSOf(t, target) {
			t.Fatal("a thread was left inside the target namespace")
		}
	}
}

func TestPodNetnsPathViaShim(t *testing.T) {
	file := filepath.Join(t.TempDir(), "netns")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if got := podNetnsPath(context.Background(), file); got != file {
		t.Errorf("without a peer pid: %q, want %q", got, file)
	}
	ctx := context.WithValue(context.Background(), peerPIDKey{}, os.Getpid())
	want := fmt.Sprintf("/proc/%d/root%s", os.Getpid(), file)
	if got := podNetnsPath(ctx, file); got != want {
		t.Errorf("with the shim's pid: %q, want %q (resolved in the shim's mount namespace)", got, want)
	}
	if got := podNetnsPath(ctx, "/does/not/exist"); got != "/does/not/exist" {
		t.Errorf("unresolvable path: %q, want it unchanged", got)
	}
}
