//go:build bench

package bench

import (
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ovn-org/libovsdb/cache"
	libovsdb "github.com/ovn-org/libovsdb/client"
	"github.com/ovn-org/libovsdb/model"

	"github.com/kovn/kovn/pkg/ovn"
	"github.com/kovn/kovn/pkg/ovn/model/nb"
	"github.com/kovn/kovn/test/bench/report"
)

const ovnSchemas = "/usr/share/ovn"

// simSet is a clusterset of simulated AZs: OVN central processes only, on unix sockets under
// /run (socket paths are limited to 108 bytes), databases and logs under _output/bench.
type simSet struct {
	t         *testing.T
	run, dir  string
	procs     []*exec.Cmd
	icsbPid   int
	azs       []*simAZ
	watch     *routeWatch
	newRoutes int
}

// simAZ is one simulated AZ: its four processes and a monitor of its NB's static routes.
type simAZ struct {
	name, run string
	subnet    netip.Prefix
	pids      []int
}

func newSimSet(t *testing.T) *simSet {
	dir, err := os.MkdirTemp(outDir(t), "azscale-")
	if err != nil {
		t.Fatal(err)
	}
	s := &simSet{t: t, run: fmt.Sprintf("/run/kovn-azscale-%d", os.Getpid()), dir: dir, watch: newRouteWatch()}
	if err := os.MkdirAll(s.run, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.stop)
	for _, db := range []string{"icnb", "icsb"} {
		file := filepath.Join(dir, db+".db")
		s.createDB(file, "ovn-ic-"+db[2:]+".ovsschema")
		pid := s.start(db, "ovsdb-server", file, "--remote=punix:"+s.sock("", db), "--unixctl="+filepath.Join(s.run, db+".ctl"))
		if db == "icsb" {
			s.icsbPid = pid
		}
		s.waitSocket(s.sock("", db))
	}
	out, err := exec.Command("ovn-ic-nbctl", "--db=unix:"+s.sock("", "icnb"), "ts-add", "ts1").CombinedOutput()
	if err != nil {
		t.Fatalf("ovn-ic-nbctl ts-add ts1: %v: %s", err, out)
	}
	return s
}

func (s *simSet) sock(az, db string) string { return filepath.Join(s.run, az, db+".sock") }

func (s *simSet) createDB(file, schema string) {
	if out, err := exec.Command("ovsdb-tool", "create", file, filepath.Join(ovnSchemas, schema)).CombinedOutput(); err != nil {
		s.t.Fatalf("ovsdb-tool create %s: %v: %s", file, err, out)
	}
}

// start runs argv with its output in <dir>/<log>.log and returns its pid.
func (s *simSet) start(log string, argv ...string) int {
	f, err := os.Create(filepath.Join(s.dir, log+".log"))
	if err != nil {
		s.t.Fatal(err)
	}
	defer f.Close()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = f, f
	if err := cmd.Start(); err != nil {
		s.t.Fatalf("%s: %v", argv[0], err)
	}
	s.procs = append(s.procs, cmd)
	return cmd.Process.Pid
}

// stop ends every process the bench started, by its pid, then removes the sockets.
func (s *simSet) stop() {
	for _, c := range s.procs {
		_ = c.Process.Signal(syscall.SIGTERM)
	}
	for _, c := range s.procs {
		done := make(chan struct{})
		go func() { _ = c.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			_ = c.Process.Kill()
			<-done
		}
	}
	_ = os.RemoveAll(s.run)
	if !s.t.Failed() {
		_ = os.RemoveAll(s.dir)
	}
}

func (s *simSet) waitSocket(path string) {
	deadline := time.Now().Add(30 * time.Second)
	for {
		c, err := net.Dial("unix", path)
		if err == nil {
			c.Close()
			return
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("%s: %v", path, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// addAZ starts AZ i (1-based): NB and SB, ovn-northd, ovn-ic; once ovn-ic has made transit
// switch ts1 in its NB, a router on it (transit address 169.254.x.y/16) with the AZ's subnet.
func (s *simSet) addAZ(i int) {
	t := s.t
	az := &simAZ{name: fmt.Sprintf("az%d", i), subnet: netip.MustParsePrefix(fmt.Sprintf("10.%d.%d.0/24", i>>8, i&255))}
	az.run = filepath.Join(s.run, az.name)
	if err := os.MkdirAll(az.run, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(s.dir, az.name), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, db := range []string{"nb", "sb"} {
		file := filepath.Join(s.dir, az.name, db+".db")
		s.createDB(file, "ovn-"+db+".ovsschema")
		az.pids = append(az.pids, s.start(filepath.Join(az.name, db), "ovsdb-server", file,
			"--remote=punix:"+s.sock(az.name, db), "--unixctl="+filepath.Join(az.run, db+".ctl")))
		s.waitSocket(s.sock(az.name, db))
	}
	nbDB, sbDB := "--ovnnb-db=unix:"+s.sock(az.name, "nb"), "--ovnsb-db=unix:"+s.sock(az.name, "sb")
	az.nbctl(t, "set", "NB_Global", ".", "name="+az.name, "options:ic-route-adv=true", "options:ic-route-learn=true")
	az.pids = append(az.pids,
		s.start(filepath.Join(az.name, "northd"), "ovn-northd", nbDB, sbDB, "--unixctl="+filepath.Join(az.run, "northd.ctl")),
		s.start(filepath.Join(az.name, "ovn-ic"), "ovn-ic", nbDB, sbDB, "--ic-nb-db=unix:"+s.sock("", "icnb"),
			"--ic-sb-db=unix:"+s.sock("", "icsb"), "--unixctl="+filepath.Join(az.run, "ic.ctl")))
	az.nbctl(t, "--timeout=120", "wait-until", "Logical_Switch", "ts1")
	port := "ts1-" + az.name
	az.nbctl(t, "lr-add", "lr",
		"--", "lrp-add", "lr", "lr-ts1", fmt.Sprintf("0a:00:00:00:%02x:%02x", i>>8, i&255), fmt.Sprintf("169.254.%d.%d/16", i>>8, i&255),
		"--", "lsp-add", "ts1", port, "--", "lsp-set-type", port, "router", "--", "lsp-set-addresses", port, "router",
		"--", "lsp-set-options", port, "router-port=lr-ts1",
		"--", "lrp-add", "lr", "lr-subnet", fmt.Sprintf("0a:00:00:01:%02x:%02x", i>>8, i&255),
		netip.PrefixFrom(az.subnet.Addr().Next(), az.subnet.Bits()).String())
	s.watch.monitor(t, az.name, "unix:"+s.sock(az.name, "nb"))
	s.azs = append(s.azs, az)
}

func (az *simAZ) nbctl(t *testing.T, args ...string) {
	t.Helper()
	argv := append([]string{"--db=unix:" + filepath.Join(az.run, "nb.sock")}, args...)
	if out, err := exec.Command("ovn-nbctl", argv...).CombinedOutput(); err != nil {
		t.Fatalf("%s: ovn-nbctl %s: %v: %s", az.name, strings.Join(args, " "), err, out)
	}
}

func (s *simSet) azNames() []string {
	var names []string
	for _, az := range s.azs {
		names = append(names, az.name)
	}
	return names
}

// waitConverged waits until every AZ has learned every other AZ's subnet.
func (s *simSet) waitConverged(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		missing := 0
		var example string
		for _, from := range s.azs {
			for _, to := range s.azs {
				if from != to && !s.watch.has(from.subnet, to.name) {
					missing++
					example = fmt.Sprintf("%s has no route to %s's %s", to.name, from.name, from.subnet)
				}
			}
		}
		if missing == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not converged after %s: %d routes missing, e.g. %s", timeout, missing, example)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// cannotGrowTo says why the set cannot grow to n AZs: memory (keeping 2 GiB free), or "".
func (s *simSet) cannotGrowTo(n int) string {
	perAZ := int64(48 << 10) // KiB, before the first measurement
	if len(s.azs) > 0 {
		perAZ, _ = s.memory()
	}
	avail := memAvailableKiB()
	need := int64(n-len(s.azs)) * perAZ
	if avail-need < 2<<20 {
		return fmt.Sprintf("%d more AZs need ~%d MiB, %d MiB available", n-len(s.azs), need>>10, avail>>10)
	}
	return ""
}

func memAvailableKiB() int64 {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == "MemAvailable:" {
			v, _ := strconv.ParseInt(f[1], 10, 64)
			return v
		}
	}
	return 0
}

// memory returns the median AZ's peak resident set (its four processes) and IC-SB's.
func (s *simSet) memory() (azKiB, icsbKiB int64) {
	var per []int64
	for _, az := range s.azs {
		var sum int64
		for _, pid := range az.pids {
			if p, err := report.ReadProc(pid); err == nil {
				sum += p.PeakRSSKiB
			}
		}
		per = append(per, sum)
	}
	if p, err := report.ReadProc(s.icsbPid); err == nil {
		icsbKiB = p.PeakRSSKiB
	}
	if len(per) == 0 {
		return 0, icsbKiB
	}
	slices.Sort(per)
	return per[len(per)/2], icsbKiB
}

// cpuSeconds is the CPU time all the set's processes have used so far.
func (s *simSet) cpuSeconds() float64 {
	var sum float64
	for _, c := range s.procs {
		if p, err := report.ReadProc(c.Process.Pid); err == nil {
			sum += p.CPUSeconds
		}
	}
	return sum
}

// routeWatch records when each AZ's NB first holds a static route to a prefix.
type routeWatch struct {
	mu      sync.Mutex
	seen    map[netip.Prefix]map[string]time.Time
	clients []libovsdb.Client
}

func newRouteWatch() *routeWatch {
	return &routeWatch{seen: map[netip.Prefix]map[string]time.Time{}}
}

// monitor connects to an AZ's NB with a monitor of Logical_Router_Static_Route only; the time
// is taken when the update reaches the client's cache.
func (w *routeWatch) monitor(t *testing.T, az, endpoint string) {
	ctx, cancel := measureCtx()
	defer cancel()
	dbModel, err := nb.FullDatabaseModel()
	if err != nil {
		t.Fatal(err)
	}
	c, err := ovn.Connect(ctx, dbModel, ovn.Config{Endpoints: []string{endpoint}}, &nb.LogicalRouterStaticRoute{})
	if err != nil {
		t.Fatalf("%s NB: %v", az, err)
	}
	t.Cleanup(c.Close)
	add := func(m model.Model) {
		if r, ok := m.(*nb.LogicalRouterStaticRoute); ok {
			if p, err := netip.ParsePrefix(r.IPPrefix); err == nil {
				w.add(p.Masked(), az, time.Now())
			}
		}
	}
	c.Cache().AddEventHandler(&cache.EventHandlerFuncs{AddFunc: func(_ string, m model.Model) { add(m) }})
	var routes []*nb.LogicalRouterStaticRoute
	if err := c.List(ctx, &routes); err != nil {
		t.Fatal(err)
	}
	for _, r := range routes { // rows from before the handler was added
		add(r)
	}
	w.clients = append(w.clients, c)
}

func (w *routeWatch) add(p netip.Prefix, az string, at time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.seen[p] == nil {
		w.seen[p] = map[string]time.Time{}
	}
	if _, ok := w.seen[p][az]; !ok {
		w.seen[p][az] = at
	}
}

func (w *routeWatch) has(p netip.Prefix, az string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	_, ok := w.seen[p][az]
	return ok
}

// waitAll waits until every AZ in azs holds a route to p and returns each one's time after start.
func (w *routeWatch) waitAll(p netip.Prefix, azs []string, start time.Time, timeout time.Duration) ([]time.Duration, error) {
	deadline := start.Add(timeout)
	for {
		w.mu.Lock()
		var lat []time.Duration
		var missing []string
		for _, az := range azs {
			if at, ok := w.seen[p][az]; ok {
				lat = append(lat, at.Sub(start))
			} else {
				missing = append(missing, az)
			}
		}
		w.mu.Unlock()
		if len(missing) == 0 {
			return lat, nil
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("after %s no route in %d AZ(s), e.g. %s", timeout, len(missing), missing[0])
		}
		time.Sleep(5 * time.Millisecond)
	}
}
