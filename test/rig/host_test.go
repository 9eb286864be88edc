package rig

import (
	"testing"
	"time"
)

// Two rigs registering or releasing at once take turns: the second waits for the first.
func TestHostRegistryCallsTakeTurns(t *testing.T) {
	inside, release := make(chan struct{}), make(chan struct{})
	first := make(chan error, 1)
	go func() {
		first <- withHostRegistry(func() error {
			close(inside)
			<-release
			return nil
		})
	}()
	<-inside
	second := make(chan error, 1)
	go func() { second <- withHostRegistry(func() error { return nil }) }()
	select {
	case <-second:
		t.Fatal("a second registry call ran while the first held the lock")
	case <-time.After(300 * time.Millisecond):
	}
	close(release)
	for _, c := range []chan error{first, second} {
		select {
		case err := <-c:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("a registry call never returned after the lock was released")
		}
	}
}
