package rig

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"time"
)

// A restartable daemon (Step.Restart) comes back a second after it exits, like a Deployment's
// pod. Benchmarks need it to stay down for a while — a cold start is "controller stopped,
// cluster keeps changing, controller starts" — so a hold file beside the supervisor's pids
// file tells the supervisor to wait before restarting it. Stopping is by the recorded pid.

func holdFile(dir, name string) string { return filepath.Join(dir, "hold-"+name) }

// waitUnheld waits while name is held; false if the supervisor is stopping.
func (s *supervisor) waitUnheld(ctx context.Context, name string) bool {
	for {
		if _, err := os.Stat(holdFile(s.spec.Dir, name)); err != nil {
			return true
		}
		select {
		case <-ctx.Done():
			return false
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// supervisorProc finds the supervisor named sup ("c1" for cluster c1's control plane).
func (s *State) supervisorProc(sup string) (Proc, error) {
	for _, p := range s.Procs {
		if p.Name == sup && p.PidsFile != "" {
			return p, nil
		}
	}
	return Proc{}, fmt.Errorf("no supervisor %q in this rig", sup)
}

// DaemonPid is the pid of daemon name of supervisor sup, from the supervisor's pids file.
func (s *State) DaemonPid(sup, name string) (int, error) {
	p, err := s.supervisorProc(sup)
	if err != nil {
		return 0, err
	}
	for _, d := range readPids(p.PidsFile) {
		if d.Name == name && Alive(d.Pid) {
			return d.Pid, nil
		}
	}
	return 0, fmt.Errorf("%s/%s is not running", sup, name)
}

// StopDaemon stops a restartable daemon by its pid and keeps it stopped until StartDaemon.
func (s *State) StopDaemon(sup, name string) error {
	pid, err := s.hold(sup, name)
	if err != nil {
		return err
	}
	stopPid(pid, 10*time.Second)
	return nil
}

// CrashDaemon kills a Restart daemon with SIGKILL, as a crash would (no clean-up of its own),
// and holds it down until StartDaemon.
func (s *State) CrashDaemon(sup, name string) error {
	pid, err := s.hold(sup, name)
	if err != nil {
		return err
	}
	return syscall.Kill(pid, syscall.SIGKILL)
}

// hold tells the supervisor not to restart the daemon and returns its current pid.
func (s *State) hold(sup, name string) (int, error) {
	p, err := s.supervisorProc(sup)
	if err != nil {
		return 0, err
	}
	if err := os.WriteFile(holdFile(filepath.Dir(p.PidsFile), name), nil, 0o644); err != nil {
		return 0, err
	}
	return s.DaemonPid(sup, name)
}

// StartDaemon lets the supervisor start a held daemon again and returns its new pid.
func (s *State) StartDaemon(ctx context.Context, sup, name string) (int, error) {
	p, err := s.supervisorProc(sup)
	if err != nil {
		return 0, err
	}
	if err := os.Remove(holdFile(filepath.Dir(p.PidsFile), name)); err != nil {
		return 0, err
	}
	for {
		if pid, err := s.DaemonPid(sup, name); err == nil {
			return pid, nil
		}
		select {
		case <-ctx.Done():
			return 0, fmt.Errorf("%s/%s did not start: %w", sup, name, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}
