package bootstrap

import (
	"context"
	"errors"
	"reflect"
	"testing"
	"time"
)

// fakeClock is a settable clock for the runner's backoff.
type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time      { return c.t }
func (c *fakeClock) add(d time.Duration) { c.t = c.t.Add(d) }
func newRunner(c *fakeClock) *StepRunner {
	return &StepRunner{Base: time.Second, Max: 4 * time.Second, Now: c.now}
}
func okStep(name string, runs *[]string) Step { return recStep(name, runs, nil) }

func recStep(name string, runs *[]string, err *error, needs ...string) Step {
	return Step{Name: name, Needs: needs, Run: func(context.Context) error {
		*runs = append(*runs, name)
		if err != nil {
			return *err
		}
		return nil
	}}
}

func TestStepRunnerFailingStepWithholdsOnlyItsDependents(t *testing.T) {
	clock := &fakeClock{t: time.Unix(1000, 0)}
	r := newRunner(clock)
	var runs []string
	var reports []StepReport
	snatErr := errors.New("iptables-restore: exit status 1")
	steps := []Step{
		okStep("ovn0", &runs),
		recStep("snat", &runs, &snatErr),
		recStep("egress-check", &runs, nil, "snat"),
		recStep("cni-config", &runs, nil, "ovn0"),
	}
	retry := r.Run(context.Background(), steps, func(rep StepReport) { reports = append(reports, rep) })

	if want := []string{"ovn0", "snat", "cni-config"}; !reflect.DeepEqual(runs, want) {
		t.Fatalf("ran %v, want %v (a failing snat must not stop cni-config; egress-check needs snat)", runs, want)
	}
	if retry != time.Second {
		t.Errorf("retry in %s, want the base backoff 1s", retry)
	}
	if len(reports) != 1 || reports[0].Step != "snat" || !errors.Is(reports[0].Err, snatErr) ||
		!reflect.DeepEqual(reports[0].Blocks, []string{"egress-check"}) || reports[0].RetryIn != time.Second {
		t.Fatalf("reports = %+v, want one failure of snat blocking egress-check, retry in 1s", reports)
	}
	if !r.OK("cni-config") || r.OK("snat") || r.OK("egress-check") {
		t.Errorf("OK: cni-config %v snat %v egress-check %v", r.OK("cni-config"), r.OK("snat"), r.OK("egress-check"))
	}
}

func TestStepRunnerRetriesWithBackoffAndReportsRecovery(t *testing.T) {
	clock := &fakeClock{t: time.Unix(1000, 0)}
	r := newRunner(clock)
	var runs []string
	var reports []StepReport
	fail := errors.New("netlink: file exists")
	steps := []Step{recStep("routes", &runs, &fail), recStep("cni-config", &runs, nil, "routes")}
	run := func() time.Duration {
		runs = nil
		return r.Run(context.Background(), steps, func(rep StepReport) { reports = append(reports, rep) })
	}

	// Backoff doubles per consecutive failure up to Max; a pass before the step is due skips it.
	for i, want := range []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 4 * time.Second} {
		if got := run(); got != want || !reflect.DeepEqual(runs, []string{"routes"}) {
			t.Fatalf("failure %d: retry %s ran %v, want %s and only routes", i+1, got, runs, want)
		}
		clock.add(want / 2)
		if got := run(); len(runs) != 0 || got != want/2 {
			t.Fatalf("failure %d: half-way pass ran %v retry %s, want nothing run and %s left", i+1, runs, got, want/2)
		}
		clock.add(want / 2)
	}
	if len(reports) != 1 {
		t.Fatalf("the same error was reported %d times, want once: %+v", len(reports), reports)
	}

	fail = errors.New("netlink: no such device") // a different error is reported again
	run()
	if len(reports) != 2 || reports[1].Err.Error() != "netlink: no such device" {
		t.Fatalf("reports = %+v, want the new error reported", reports)
	}

	fail = nil // recovered: reported once, dependents run again, backoff resets
	clock.add(time.Hour)
	if got := run(); got != 0 || !reflect.DeepEqual(runs, []string{"routes", "cni-config"}) {
		t.Fatalf("after recovery: retry %s ran %v, want 0 and routes, cni-config", got, runs)
	}
	if len(reports) != 3 || !reports[2].Recovered || reports[2].Step != "routes" {
		t.Fatalf("reports = %+v, want a recovery of routes", reports)
	}
	fail = errors.New("again")
	if got := run(); got != time.Second {
		t.Errorf("backoff after a recovery starts at %s, want 1s", got)
	}
}

func TestStepRunnerPendingIsRetriedQuietly(t *testing.T) {
	clock := &fakeClock{t: time.Unix(1000, 0)}
	r := newRunner(clock)
	var runs []string
	var reports []StepReport
	wait := Pending("no join address yet")
	steps := []Step{recStep("ovn0", &runs, &wait), recStep("routes", &runs, nil, "ovn0")}
	for i := 0; i < 3; i++ {
		runs = nil
		if got := r.Run(context.Background(), steps, func(rep StepReport) { reports = append(reports, rep) }); got != time.Second {
			t.Fatalf("pending retry in %s, want 1s every time (no growing backoff)", got)
		}
		if !reflect.DeepEqual(runs, []string{"ovn0"}) {
			t.Fatalf("ran %v, want only ovn0", runs)
		}
		clock.add(time.Second)
	}
	if len(reports) != 0 {
		t.Errorf("a pending step was reported as failing: %+v", reports)
	}
}
