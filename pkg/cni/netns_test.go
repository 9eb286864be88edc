package cni

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/kovn/kovn/pkg/hostnet/netnstest"
)

// newNetNS creates a throwaway network namespace and returns a path that opens it.
func newNetNS(t *testing.T) string { return netnstest.New(t) }

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
