package rig

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// SupervisorSpec is what one supervisor runs. A supervisor is `kovn-rig supervise SPEC`, started
// inside a namespace with `ip netns exec`; it owns every process of one control plane or node.
// It is a child subreaper, so daemonizing children (containerd shims, container processes) are
// re-parented to it and Down can stop all of them by pid, never by name.
type SupervisorSpec struct {
	Name string `json:"name"`
	Dir  string `json:"dir"` // pids.json, ready / error markers
	// Hostname, when set, is the hostname of the supervisor and everything it starts: kovn-rig
	// starts it in a UTS namespace of its own, as a node is a machine of its own name (a
	// hostNetwork pod answers with its node's name, not the host's).
	Hostname string `json:"hostname,omitempty"`
	// LauncherUTS is the UTS namespace kovn-rig ran in (the host's): the supervisor refuses to
	// set a hostname there.
	LauncherUTS string `json:"launcherUTS,omitempty"`
	// CgroupRoots, when set, makes the supervisor remount the cgroup v1 hierarchies (ip netns exec
	// leaves /sys/fs/cgroup empty) and create these roots in every hierarchy for kubelet.
	CgroupRoots []string `json:"cgroupRoots,omitempty"`
	// Sysctls are /proc/sys entries shadowed by files holding these values in this mount
	// namespace, so kubelet's writes to machine-wide sysctls never reach the host.
	Sysctls map[string]string `json:"sysctls,omitempty"`
	Binds   []Bind            `json:"binds,omitempty"`
	Steps   []Step            `json:"steps"`
}

// Bind is a bind mount made in the supervisor's private mount namespace.
type Bind struct {
	Src  string `json:"src"`
	Dst  string `json:"dst"`
	File bool   `json:"file,omitempty"`
}

// Step is one command: a daemon that must become ready, or a one-shot that must exit 0.
type Step struct {
	Name    string        `json:"name"`
	Argv    []string      `json:"argv"`
	Env     []string      `json:"env,omitempty"`
	Daemon  bool          `json:"daemon,omitempty"`
	Log     string        `json:"log"`
	Ready   Ready         `json:"ready,omitempty"`
	Timeout time.Duration `json:"timeout,omitempty"`
	// Restart makes the supervisor start the daemon again whenever it exits, as a Deployment or
	// DaemonSet would: tests kill such a process by pid to exercise restarts.
	Restart bool `json:"restart,omitempty"`
	// StopGrace is how long the rig's teardown waits after SIGTERM before SIGKILL (0: 10 s).
	StopGrace time.Duration `json:"stopGrace,omitempty"`
}

// Ready says how to tell that a daemon is serving.
type Ready struct {
	Unix  string `json:"unix,omitempty"`  // a unix socket accepts connections
	TCP   string `json:"tcp,omitempty"`   // a TCP address accepts connections
	HTTPS string `json:"https,omitempty"` // GET returns 200 (certificate not verified: readiness only)
	Token string `json:"token,omitempty"` // bearer token for HTTPS
	File  string `json:"file,omitempty"`  // a file exists (e.g. a kubeconfig a step writes)
}

const (
	readyMarker = "ready"
	errorMarker = "error"
	pidsFile    = "pids.json"
)

type supervisor struct {
	ctx     context.Context // the supervisor's lifetime (runStep contexts end with each step)
	spec    SupervisorSpec
	mu      sync.Mutex
	exits   map[int]chan syscall.WaitStatus
	started []Proc
}

// Supervise runs a supervisor until SIGTERM/SIGINT, then stops everything it started.
func Supervise(specFile string) error {
	b, err := os.ReadFile(specFile)
	if err != nil {
		return err
	}
	var spec SupervisorSpec
	if err := json.Unmarshal(b, &spec); err != nil {
		return fmt.Errorf("spec %s: %w", specFile, err)
	}
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("set child subreaper: %w", err)
	}
	if spec.Hostname != "" {
		if err := setOwnHostname(spec.Hostname, spec.LauncherUTS); err != nil {
			return err
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	s := &supervisor{ctx: ctx, spec: spec, exits: map[int]chan syscall.WaitStatus{}}
	go s.reap()
	err = s.run(ctx)
	if err != nil {
		log.Printf("supervisor %s: %v", spec.Name, err)
		_ = os.WriteFile(filepath.Join(spec.Dir, errorMarker), []byte(err.Error()+"\n"), 0o644)
	} else {
		_ = os.WriteFile(filepath.Join(spec.Dir, readyMarker), []byte(time.Now().Format(time.RFC3339Nano)), 0o644)
		<-ctx.Done()
	}
	s.shutdown()
	return err
}

func (s *supervisor) run(ctx context.Context) error {
	if err := s.setupMounts(); err != nil {
		return err
	}
	for _, st := range s.spec.Steps {
		if err := s.runStep(ctx, st); err != nil {
			return fmt.Errorf("step %s: %w", st.Name, err)
		}
	}
	return nil
}

// setOwnHostname names the supervisor's UTS namespace, and refuses unless it is a new one, not
// the launcher's (the host's): the host's hostname is never the rig's to change.
func setOwnHostname(name, launcherUTS string) error {
	self, err := os.Readlink("/proc/self/ns/uts")
	if err != nil || launcherUTS == "" || self == launcherUTS {
		return fmt.Errorf("hostname %s: the supervisor does not run in a UTS namespace of its own (%s, kovn-rig's %q; %v)", name, self, launcherUTS, err)
	}
	return unix.Sethostname([]byte(name))
}

// reap collects every child, including orphans adopted as subreaper, and hands exit statuses
// to whoever waits for that pid.
func (s *supervisor) reap() {
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, 0, nil)
		if err != nil {
			time.Sleep(50 * time.Millisecond)
			continue
		}
		s.mu.Lock()
		ch := s.exits[pid]
		s.mu.Unlock()
		if ch != nil {
			ch <- ws
		}
	}
}

func (s *supervisor) start(st Step) (int, chan syscall.WaitStatus, error) {
	logf, err := os.OpenFile(st.Log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return 0, nil, err
	}
	defer logf.Close()
	// stdin must be open: OVS tools abort when a socket lands on fd 0.
	devnull, err := os.Open(os.DevNull)
	if err != nil {
		return 0, nil, err
	}
	defer devnull.Close()
	path := st.Argv[0]
	if !strings.Contains(path, "/") {
		if path, err = lookPath(path); err != nil {
			return 0, nil, err
		}
	}
	ch := make(chan syscall.WaitStatus, 1)
	// Hold the lock across the fork so the reaper cannot see the exit before ch is registered.
	s.mu.Lock()
	defer s.mu.Unlock()
	p, err := os.StartProcess(path, st.Argv, &os.ProcAttr{
		Env:   append(os.Environ(), st.Env...),
		Files: []*os.File{devnull, logf, logf},
		Sys:   &syscall.SysProcAttr{Setpgid: true},
	})
	if err != nil {
		return 0, nil, err
	}
	s.exits[p.Pid] = ch
	return p.Pid, ch, nil
}

func (s *supervisor) runStep(ctx context.Context, st Step) error {
	timeout := st.Timeout
	if timeout == 0 {
		timeout = 60 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	pid, exit, err := s.start(st)
	if err != nil {
		return err
	}
	if !st.Daemon {
		select {
		case ws := <-exit:
			if ws.ExitStatus() != 0 {
				return fmt.Errorf("%s exited with %d (log: %s)", strings.Join(st.Argv, " "), ws.ExitStatus(), st.Log)
			}
			return nil
		case <-ctx.Done():
			_ = syscall.Kill(pid, syscall.SIGKILL)
			return fmt.Errorf("%s did not finish in %s (log: %s)", st.Argv[0], timeout, st.Log)
		}
	}
	if err := s.record(Proc{Name: st.Name, Pid: pid, Log: st.Log}); err != nil {
		return err
	}
	for {
		if ok := probe(st.Ready); ok {
			if st.Restart {
				go s.keepRunning(ctx, st, exit)
			}
			return nil
		}
		select {
		case ws := <-exit:
			return fmt.Errorf("%s exited with %d before it was ready (log: %s)", st.Argv[0], ws.ExitStatus(), st.Log)
		case <-ctx.Done():
			return fmt.Errorf("%s not ready after %s (log: %s)", st.Argv[0], timeout, st.Log)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// record adds or replaces (by name) a started daemon and rewrites pids.json.
func (s *supervisor) record(p Proc) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	replaced := false
	for i := range s.started {
		if s.started[i].Name == p.Name {
			s.started[i], replaced = p, true
		}
	}
	if !replaced {
		s.started = append(s.started, p)
	}
	return writePids(filepath.Join(s.spec.Dir, pidsFile), s.started)
}

// keepRunning restarts a Restart daemon each time it exits, until the supervisor stops.
func (s *supervisor) keepRunning(ctx context.Context, st Step, exit chan syscall.WaitStatus) {
	runCtx := s.ctx
	for {
		select {
		case <-runCtx.Done():
			return
		case ws := <-exit:
			log.Printf("%s exited (%v); restarting in 1s", st.Name, ws.ExitStatus())
		}
		select {
		case <-runCtx.Done():
			return
		case <-time.After(time.Second):
		}
		if !s.waitUnheld(runCtx, st.Name) {
			return
		}
		pid, ch, err := s.start(st)
		if err != nil {
			log.Printf("restart %s: %v", st.Name, err)
			return
		}
		exit = ch
		_ = s.record(Proc{Name: st.Name, Pid: pid, Log: st.Log})
	}
}

func probe(r Ready) bool {
	switch {
	case r.Unix != "":
		return dialOK("unix", r.Unix)
	case r.TCP != "":
		return dialOK("tcp", r.TCP)
	case r.HTTPS != "":
		return httpsOK(r.HTTPS, r.Token)
	case r.File != "":
		_, err := os.Stat(r.File)
		return err == nil
	}
	return true
}

func dialOK(network, addr string) bool {
	c, err := net.DialTimeout(network, addr, time.Second)
	if err != nil {
		return false
	}
	c.Close()
	return true
}

func httpsOK(url, token string) bool {
	cl := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // readiness probe only
	}}
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := cl.Do(req)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// shutdown stops daemons in reverse start order, then kills whatever was adopted (shims,
// container processes) until no child is left.
func (s *supervisor) shutdown() {
	s.mu.Lock()
	started := append([]Proc(nil), s.started...)
	s.mu.Unlock()
	for i := len(started) - 1; i >= 0; i-- {
		t0 := time.Now()
		stopPid(started[i].Pid, s.stopGrace(started[i].Name))
		if d := time.Since(t0); d > 500*time.Millisecond { // where a rig's teardown time goes
			log.Printf("supervisor %s: stopping %s took %s", s.spec.Name, started[i].Name, d.Round(10*time.Millisecond))
		}
	}
	for round := 0; round < 50; round++ {
		kids := childrenOf(os.Getpid())
		if len(kids) == 0 {
			return
		}
		for _, k := range kids {
			_ = syscall.Kill(k, syscall.SIGKILL)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// stopGrace is the named step's StopGrace, 10 s if it has none.
func (s *supervisor) stopGrace(name string) time.Duration {
	for _, st := range s.spec.Steps {
		if st.Name == name && st.StopGrace > 0 {
			return st.StopGrace
		}
	}
	return 10 * time.Second
}

// stopPid sends SIGTERM, waits up to grace, then SIGKILL.
func stopPid(pid int, grace time.Duration) {
	if !Alive(pid) {
		return
	}
	_ = syscall.Kill(pid, syscall.SIGTERM)
	deadline := time.Now().Add(grace)
	for time.Now().Before(deadline) {
		if !Alive(pid) {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	_ = syscall.Kill(pid, syscall.SIGKILL)
}

// childrenOf lists live processes whose parent is pid.
func childrenOf(pid int) []int {
	ents, _ := os.ReadDir("/proc")
	var kids []int
	for _, e := range ents {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		st := string(b)
		i := strings.LastIndexByte(st, ')')
		f := strings.Fields(st[i+1:])
		if len(f) > 1 && f[1] == strconv.Itoa(pid) && f[0] != "Z" {
			kids = append(kids, p)
		}
	}
	return kids
}

func lookPath(name string) (string, error) {
	for _, d := range strings.Split(os.Getenv("PATH")+":/usr/sbin:/sbin", ":") {
		p := filepath.Join(d, name)
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", errors.New(name + ": not found in PATH (run hack/install-deps.sh)")
}
