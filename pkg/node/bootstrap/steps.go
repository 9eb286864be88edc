package bootstrap

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"
)

// Step is one piece of the node's plumbing. Steps are synced independently: one that fails is
// retried on its own backoff and reported, and only the steps that name it in Needs wait for it.
type Step struct {
	Name string
	// Needs lists earlier steps whose latest attempt must have succeeded; each entry is a real
	// dependency (e.g. routes go via ovn0), never mere ordering.
	Needs []string
	Run   func(ctx context.Context) error
}

// StepReport is a change in a step's health, for events and logs. Exactly one of Err and
// Recovered is set.
type StepReport struct {
	Step      string
	Err       error
	Blocks    []string      // steps withheld while this one fails
	RetryIn   time.Duration // when Err is set
	Recovered bool
}

// ErrPending marks a wait on someone else (e.g. the controller has not assigned the join
// address yet): retried at the base interval, not counted as a failure and not reported.
var ErrPending = errors.New("pending")

// Pending wraps a reason to wait as ErrPending.
func Pending(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrPending, fmt.Sprintf(format, args...))
}

type stepState struct {
	ok       bool
	err      string // the failure last reported; "" if none
	failures int    // consecutive, for the backoff
	due      time.Time
}

// StepRunner runs steps with a per-step exponential backoff. Zero value: 1 s doubling to 30 s.
type StepRunner struct {
	Base, Max time.Duration
	Now       func() time.Time // tests set a fake clock

	mu    sync.Mutex
	state map[string]*stepState
}

// Run runs, in order, every step whose backoff has expired and whose needs succeeded, reports
// changes in health and returns the time until the earliest retry (0: nothing to retry).
func (r *StepRunner) Run(ctx context.Context, steps []Step, report func(StepReport)) time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.state == nil {
		r.state = map[string]*stepState{}
	}
	now := r.now()
	var retry time.Duration
	for _, s := range steps {
		st := r.state[s.Name]
		if st == nil {
			st = &stepState{}
			r.state[s.Name] = st
		}
		if !st.ok && now.Before(st.due) {
			retry = earliest(retry, st.due.Sub(now))
			continue
		}
		if !r.needsMet(s) {
			st.ok = false // withheld: its own failing need is what gets reported and retried
			continue
		}
		if d, ok := r.attempt(ctx, s, st, now, steps, report); !ok {
			retry = earliest(retry, d)
		}
	}
	return retry
}

// attempt runs one step and updates its state; it returns the backoff when the step did not
// succeed.
func (r *StepRunner) attempt(ctx context.Context, s Step, st *stepState, now time.Time, steps []Step, report func(StepReport)) (time.Duration, bool) {
	err := s.Run(ctx)
	if err == nil {
		if st.err != "" && report != nil {
			report(StepReport{Step: s.Name, Recovered: true})
		}
		*st = stepState{ok: true}
		return 0, true
	}
	st.ok = false
	if errors.Is(err, ErrPending) {
		st.due = now.Add(r.base())
		return r.base(), false
	}
	st.failures++
	d := r.backoff(st.failures)
	st.due = now.Add(d)
	if msg := err.Error(); msg != st.err {
		st.err = msg // reported once per distinct error, not on every retry
		if report != nil {
			report(StepReport{Step: s.Name, Err: err, Blocks: dependents(s.Name, steps), RetryIn: d})
		}
	}
	return d, false
}

func (r *StepRunner) needsMet(s Step) bool {
	for _, n := range s.Needs {
		if st := r.state[n]; st == nil || !st.ok {
			return false
		}
	}
	return true
}

// OK reports whether the step's latest attempt succeeded.
func (r *StepRunner) OK(step string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	st := r.state[step]
	return st != nil && st.ok
}

func (r *StepRunner) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

func (r *StepRunner) base() time.Duration {
	if r.Base > 0 {
		return r.Base
	}
	return time.Second
}

func (r *StepRunner) backoff(failures int) time.Duration {
	maxD := r.Max
	if maxD <= 0 {
		maxD = 30 * time.Second
	}
	d := r.base()
	for i := 1; i < failures && d < maxD; i++ {
		d *= 2
	}
	return min(d, maxD)
}

// dependents are the steps withheld, directly or through others, while name fails.
func dependents(name string, steps []Step) []string {
	out := []string{}
	down := map[string]bool{name: true}
	for _, s := range steps {
		if slices.ContainsFunc(s.Needs, func(n string) bool { return down[n] }) {
			down[s.Name] = true
			out = append(out, s.Name)
		}
	}
	return out
}

func earliest(cur, d time.Duration) time.Duration {
	if cur == 0 || d < cur {
		return d
	}
	return cur
}
