package rig

import (
	"encoding/json"
	"io"
	"net"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// TestForwarderServesInheritedListener: the forwarder serves the listening socket it is
// handed (Forward.FD) rather than listening again on its address, which another process may
// hold by then (CI saw "bind: address already in use" and a bring-up that waited forever).
// Here the address stays held by the test's own copy of the socket, so a new listen fails.
func TestForwarderServesInheritedListener(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close() // holds the address all along
	f, err := l.(*net.TCPListener).File()
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fd, err := syscall.Dup(int(f.Fd())) // the forwarder closes the descriptor it is given
	if err != nil {
		t.Fatal(err)
	}
	spec := filepath.Join(t.TempDir(), "forward.json")
	// The target's namespace does not exist: the forwarder accepts, fails to dial, closes.
	b, _ := json.Marshal([]Forward{{Listen: l.Addr().String(), NetNS: "kovn-test-no-such-netns", Target: "192.0.2.1:1", FD: fd}})
	if err := os.WriteFile(spec, b, 0o644); err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	go func() { errc <- RunForwarder(spec) }()
	deadline := time.After(10 * time.Second)
	for {
		if _, err := os.Stat(forwarderReady(spec)); err == nil {
			break
		}
		select {
		case err := <-errc:
			t.Fatalf("forwarder: %v", err)
		case <-deadline:
			t.Fatal("forwarder not ready within 10 s")
		case <-time.After(10 * time.Millisecond):
		}
	}
	c, err := net.DialTimeout("tcp", l.Addr().String(), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if n, err := c.Read(make([]byte, 1)); err != io.EOF {
		t.Fatalf("read %d bytes, %v: want the forwarder to close the connection it could not forward", n, err)
	}
}
