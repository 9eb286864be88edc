package ovn

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ovn-org/libovsdb/client"
)

// LivenessInterval is how often a Liveness asks its database for an echo.
const LivenessInterval = 2 * time.Second

// echoTimeout bounds one echo: a database that takes longer is not answering.
const echoTimeout = time.Second

// Liveness knows whether one OVSDB client's database answers. libovsdb's Connected() stays
// true while a reconnecting client (WithReconnect) has lost its server, and a partitioned
// TCP connection looks connected until the kernel gives up, so Liveness asks the database
// for an echo every LivenessInterval and keeps the verdict. Health checks, gauges and
// reconcilers read Answers, which costs nothing; one echo per interval per database is the
// only traffic, however many readers there are.
type Liveness struct {
	c        client.Client
	answers  atomic.Bool
	mu       sync.Mutex
	onChange []func(answers bool)
}

// WatchLiveness echoes c's database once (so Answers is right on return), then every
// interval until ctx ends; a zero interval means LivenessInterval. A nil c never answers.
func WatchLiveness(ctx context.Context, c client.Client, interval time.Duration) *Liveness {
	l := &Liveness{c: c}
	if c == nil {
		return l
	}
	if interval <= 0 {
		interval = LivenessInterval
	}
	l.answers.Store(echo(ctx, c))
	go func() {
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			now := echo(ctx, c)
			if l.answers.Swap(now) != now {
				l.mu.Lock()
				fns := l.onChange
				l.mu.Unlock()
				for _, fn := range fns {
					fn(now)
				}
			}
		}
	}()
	return l
}

// Answers reports the last verdict: the database answered its last echo and the client has
// not seen the connection drop since. A nil Liveness never answers.
func (l *Liveness) Answers() bool {
	return l != nil && l.c != nil && l.c.Connected() && l.answers.Load()
}

// OnChange calls fn (from the probing goroutine) whenever the verdict flips.
func (l *Liveness) OnChange(fn func(answers bool)) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.onChange = append(l.onChange, fn)
}

func echo(ctx context.Context, c client.Client) bool {
	if !c.Connected() {
		return false
	}
	ctx, cancel := context.WithTimeout(ctx, echoTimeout)
	defer cancel()
	return c.Echo(ctx) == nil
}
