package e2e

import (
	"testing"
	"time"
)

// TestLabGate: labs run while they fit, a lab larger than the capacity runs alone, and a
// heavier waiting lab that fits goes before a lighter one.
func TestLabGate(t *testing.T) {
	for _, c := range []struct {
		used    int
		waiting map[int]int
		w       int
		want    bool
	}{
		{0, nil, 3, true},
		{0, nil, 12, true},               // larger than the capacity: alone
		{3, nil, 12, false},              // ... and only alone
		{6, nil, 3, true},                // 9: fits
		{6, nil, 6, false},               // two multi-cluster labs: not together
		{3, map[int]int{6: 1}, 3, false}, // the waiting 6 fits: it goes first
		{6, map[int]int{6: 1}, 3, true},  // the waiting 6 does not fit: the 3 may go
		{0, map[int]int{3: 2, 6: 1}, 6, true},
	} {
		g := newLabGate()
		g.used = c.used
		for w, n := range c.waiting {
			g.waiting[w] = n
		}
		if got := g.admits(c.w); got != c.want {
			t.Errorf("used %d, waiting %v: admits(%d) = %t, want %t", c.used, c.waiting, c.w, got, c.want)
		}
	}

	g := newLabGate()
	g.acquire(6)
	admitted := make(chan int, 1)
	go func() { g.acquire(6); admitted <- 6 }()
	select {
	case <-admitted:
		t.Fatal("a second lab of 6 admitted beside the first")
	case <-time.After(50 * time.Millisecond):
	}
	g.release(6)
	select {
	case <-admitted:
	case <-time.After(5 * time.Second):
		t.Fatal("the waiting lab was not admitted once the first was released")
	}
}
