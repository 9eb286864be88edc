package hostnet

import (
	"errors"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/vishvananda/netns"

	"github.com/kovn/kovn/pkg/hostnet/netnstest"
)

func newNetNS(t *testing.T) string { return netnstest.New(t) }

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
	if err := WithNetNS(target, func() error {
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
	if err := WithNetNS(target, func() error { return boom }); !errors.Is(err, boom) {
		t.Errorf("fn's error = %v, want boom", err)
	}
	if err := WithNetNS(target, func() error { panic("inside") }); err == nil || !strings.Contains(err.Error(), "panic") {
		t.Errorf("a panicking fn gave %v, want an error", err)
	}
	if err := WithNetNS(filepath.Join(t.TempDir(), "gone"), func() error { return nil }); !errors.Is(err, ErrInvalidNetNS) {
		t.Errorf("missing netns: %v, want ErrInvalidNetNS", err)
	}
	// Every thread went back: goroutines keep running in the test's namespace.
	for range 20 {
		if inNetNSOf(t, target) {
			t.Fatal("a thread was left inside the target namespace")
		}
	}
}
