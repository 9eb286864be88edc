package rig

import (
	"context"
	"os"
	"testing"
	"time"
)

func TestHeldDaemonWaitsUntilReleased(t *testing.T) {
	s := &supervisor{spec: SupervisorSpec{Dir: t.TempDir()}}
	if err := os.WriteFile(holdFile(s.spec.Dir, "kovn-controller"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	done := make(chan bool)
	go func() { done <- s.waitUnheld(context.Background(), "kovn-controller") }()
	select {
	case <-done:
		t.Fatal("restarted while held")
	case <-time.After(200 * time.Millisecond):
	}
	if !s.waitUnheld(context.Background(), "other") {
		t.Fatal("a daemon that is not held must restart at once")
	}
	_ = os.Remove(holdFile(s.spec.Dir, "kovn-controller"))
	select {
	case ok := <-done:
		if !ok {
			t.Fatal("released daemon not restarted")
		}
	case <-time.After(2 * time.Second):
		t.Fatal("released daemon still waiting")
	}
	ctx, cancel := context.WithCancel(context.Background())
	_ = os.WriteFile(holdFile(s.spec.Dir, "x"), nil, 0o644)
	cancel()
	if s.waitUnheld(ctx, "x") {
		t.Fatal("a stopping supervisor must not restart a held daemon")
	}
}
