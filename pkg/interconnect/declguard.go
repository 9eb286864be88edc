package interconnect

import (
	"context"
	"fmt"
	"net/netip"
	"strings"
	"sync"
	"time"

	libovsdb "github.com/ovn-org/libovsdb/client"
)

// declSettle is how long after its own write of a declaration kovn takes a different value
// in its cache for its write not yet seen, rather than someone else's.
const declSettle = 2 * time.Second

// declGuard remembers what this AZ last declared under each IC_NB_Global key (its subnets,
// its withdrawn subnets), to tell a declaration someone else changed from one this AZ changes
// itself: OVN-IC lets any AZ's certificate write IC_NB_Global, and a peer that widened this
// AZ's declared subnets could make the others accept routes this AZ never advertised. A pass
// that must rewrite the value it wrote (declSettle or more before, unchanged on its side
// since) has found it changed by someone else.
type declGuard struct {
	mu   sync.Mutex
	last map[string]declWrite
}

type declWrite struct {
	value string
	at    time.Time
}

// observe records that key holds want from now on, having found found there; it reports
// whether found is someone else's change of what this AZ wrote.
func (g *declGuard) observe(key, found, want string, now time.Time) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.last == nil {
		g.last = map[string]declWrite{}
	}
	prev, ok := g.last[key]
	if found == want {
		if !ok || prev.value != want { // written by an earlier run, or just now: guarded from here on
			g.last[key] = declWrite{value: want, at: now}
		}
		return false
	}
	g.last[key] = declWrite{value: want, at: now}
	return ok && prev.value == want && now.Sub(prev.at) >= declSettle
}

// declareGuarded is declare with the guard: a declaration someone else changed is put back
// (the write) and noted as tampering, naming what it had been changed to.
func (r *Reconciler) declareGuarded(ctx context.Context, c libovsdb.Client, keyPrefix, az string, prefixes []netip.Prefix, what string) error {
	key, want := keyPrefix+az, strings.Join(prefixStrings(prefixes), ",")
	found, err := declare(ctx, c, keyPrefix, az, prefixes)
	if err != nil {
		return err
	}
	if r.declared.observe(key, found, want, time.Now()) {
		r.Tamper.Note(1, fmt.Sprintf("put back: the %s AZ %s declares were changed from %q to %q "+
			"(not by this cluster; OVN-IC's databases let any AZ's certificate write them)", what, az, want, found))
	}
	return nil
}
