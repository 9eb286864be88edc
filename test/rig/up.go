package rig

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// Rig is a running (or partly started) lab.
type Rig struct {
	State *State
	pkis  map[int]clusterPKI
}

// ErrAlreadyUp is returned by Up when the state dir already holds a rig.
var ErrAlreadyUp = errors.New("a rig is already up")

// CheckDeps reports every missing binary, naming the step that installs it.
func CheckDeps(cfg Config) error {
	var missing []string
	for _, b := range []string{"kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubelet", "kubectl"} {
		if _, err := os.Stat(cfg.k8sBin(b)); err != nil {
			missing = append(missing, cfg.k8sBin(b))
		}
	}
	for _, b := range []string{"ip", "ethtool", "etcd", "ovsdb-server", "ovsdb-tool", "ovs-vswitchd", "ovs-vsctl",
		"ovn-northd", "ovn-controller", "containerd", "containerd-shim-runc-v2", "ctr", "runc"} {
		if _, err := lookPath(b); err != nil {
			missing = append(missing, b)
		}
	}
	files := []string{"/usr/lib/cni/loopback", filepath.Join(ovnSchemaDir, "ovn-ic-nb.ovsschema")}
	if cfg.BridgeNodes > 0 {
		files = append(files, bridgePlugins...)
	}
	for _, f := range files {
		if _, err := os.Stat(f); err != nil {
			missing = append(missing, f)
		}
	}
	if cfg.Kovn {
		for _, b := range []string{"kovn-controller", "kovn-daemon", "kovn-cni", "kovn-speaker"} {
			if _, err := os.Stat(filepath.Join(cfg.KovnBinDir, b)); err != nil {
				missing = append(missing, filepath.Join(cfg.KovnBinDir, b)+" (make build)")
			}
		}
		for _, p := range cfg.delegatePluginPaths() {
			if _, err := os.Stat(p); err != nil {
				missing = append(missing, p+" (make build)")
			}
		}
		if _, err := lookPath("iptables-restore"); err != nil {
			missing = append(missing, "iptables-restore")
		}
		// The components' identities and RBAC are rendered from the chart.
		if _, err := os.Stat(cfg.helmBin()); err != nil {
			missing = append(missing, cfg.helmBin()+" (make helm)")
		}
		if cfg.Chart() {
			if _, err := os.Stat(cfg.ChartImage()); err != nil {
				missing = append(missing, cfg.ChartImage()+" (make images)")
			}
		}
	}
	for _, im := range podImages {
		if _, err := os.Stat(filepath.Join(cfg.KovnBinDir, im.Binary)); err != nil {
			missing = append(missing, filepath.Join(cfg.KovnBinDir, im.Binary)+" (make build)")
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("missing dependencies: %v — run `hack/install-deps.sh` (make deps)", missing)
	}
	return nil
}

// lockDir takes an exclusive, non-blocking lock on the state dir for the life of the process
// call, so two `up`/`down` on one dir never interleave.
func lockDir(dir string) (func(), error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(filepath.Join(dir, ".lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return nil, fmt.Errorf("%w: another kovn-rig is working on %s right now", ErrAlreadyUp, dir)
	}
	return func() { _ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN); f.Close() }, nil
}

// Up brings up the whole rig and returns once every control plane is serving and every kubelet
// has registered its Node. On error the partial rig is left for Down (state.json records it).
func Up(ctx context.Context, cfg Config) (*Rig, error) {
	cfg, err := cfg.Defaults()
	if err != nil {
		return nil, err
	}
	unlock, err := lockDir(cfg.Dir)
	if err != nil {
		return nil, err
	}
	defer unlock()
	if st, err := LoadState(cfg.Dir); err == nil {
		return nil, fmt.Errorf("%w in %s (started %s, %d processes recorded); run `kovn-rig down --dir %s` first",
			ErrAlreadyUp, cfg.Dir, st.StartedAt.Format(time.RFC3339), len(st.Procs), cfg.Dir)
	}
	if err := CheckDeps(cfg); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, cfg.ReadyTimeout)
	defer cancel()
	r := &Rig{State: &State{Config: cfg, StartedAt: time.Now(), Forwards: map[string]string{}}, pkis: map[int]clusterPKI{}}
	if err := r.State.Save(); err != nil {
		return nil, err
	}
	phases := []struct {
		name string
		run  func(context.Context) error
	}{
		{"network", r.network}, {"control planes", r.startControlPlanes}, {"foreign AZ", r.startForeignAZ},
		{"forwarder", r.startForwarder}, {"nodes", r.startNodes}, {"charts", r.installCharts}, {"nodes registered", r.waitNodesRegistered},
	}
	var took []string // where a rig's start-up time goes
	for _, p := range phases {
		start := time.Now()
		if err := p.run(ctx); err != nil {
			_ = r.State.Save()
			return r, err
		}
		if d := time.Since(start); d >= 100*time.Millisecond {
			took = append(took, fmt.Sprintf("%s %.1fs", p.name, d.Seconds()))
		}
		if err := r.State.Save(); err != nil {
			return r, err
		}
	}
	r.State.UpPhases = strings.Join(took, ", ")
	r.State.UpSeconds = time.Since(r.State.StartedAt).Seconds()
	return r, r.State.Save()
}

func (r *Rig) network(context.Context) error {
	cfg, st := r.State.Config, r.State
	if err := registerHostUse(cfg.Prefix); err != nil {
		return err
	}
	if err := createFabric(cfg.FabricNS()); err != nil {
		return err
	}
	st.Namespaces = append(st.Namespaces, cfg.FabricNS())
	plug := func(ns, port string, ips []netip.Addr) error {
		if err := addNetNS(ns); err != nil {
			return err
		}
		st.Namespaces = append(st.Namespaces, ns)
		return plugIntoFabric(cfg.FabricNS(), ns, port, FabricAddrs(ips))
	}
	if cfg.Interconnected() {
		if err := plug(cfg.ICNS(), "ic", cfg.ICDBIPs()); err != nil {
			return err
		}
	}
	if cfg.ForeignAZ {
		if err := r.plugForeignAZ(plug); err != nil {
			return err
		}
	}
	if err := plug(cfg.ExtNS(), "ext", cfg.ExternalHostIPs()); err != nil {
		return err
	}
	if err := r.plugToR(plug); err != nil {
		return err
	}
	for cl := 1; cl <= cfg.Clusters; cl++ {
		if err := plug(cfg.ControlPlaneNS(cl), fmt.Sprintf("c%dcp", cl), cfg.ControlPlaneIPs(cl)); err != nil {
			return err
		}
		for n := 1; n <= cfg.Nodes; n++ {
			if err := plug(cfg.NodeNS(cl, n), fmt.Sprintf("c%dn%d", cl, n), cfg.NodeIPs(cl, n)); err != nil {
				return err
			}
		}
		if err := controlPlaneRoutes(cfg, cl); err != nil {
			return err
		}
	}
	return r.plugUnderlay()
}

// controlPlaneRoutes route the cluster's pod and Service ranges from its control plane through
// node 1, as a control plane host that is not itself a node would be configured: kube-apiserver
// reaches pods and ClusterIPs (webhooks, aggregated APIs, pods/proxy) through a node, which
// masquerades the connection into the overlay.
func controlPlaneRoutes(cfg Config, cl int) error {
	if cfg.Nodes < 1 {
		return nil
	}
	via := cfg.NodeIPs(cl, 1)
	for _, dst := range append(cfg.PodCIDRs(cl), cfg.ServiceCIDRs(cl)...) {
		for _, gw := range via {
			if gw.Is4() != dst.Addr().Is4() {
				continue
			}
			if err := ipCmd("-n", cfg.ControlPlaneNS(cl), "route", "add", dst.String(), "via", gw.String()); err != nil {
				return err
			}
		}
	}
	return nil
}

// launch starts `kovn-rig supervise` for spec inside netns, records it and returns it.
func (r *Rig) launch(ns string, spec SupervisorSpec) (Proc, error) {
	for _, m := range []string{readyMarker, errorMarker, pidsFile} {
		_ = os.Remove(filepath.Join(spec.Dir, m))
	}
	if spec.Hostname != "" {
		uts, err := os.Readlink("/proc/self/ns/uts")
		if err != nil {
			return Proc{}, fmt.Errorf("%s: the host's UTS namespace: %w", spec.Name, err)
		}
		spec.LauncherUTS = uts
	}
	specFile := filepath.Join(spec.Dir, "supervisor.json")
	b, _ := json.MarshalIndent(spec, "", "  ")
	if err := os.WriteFile(specFile, b, 0o644); err != nil {
		return Proc{}, err
	}
	logPath := filepath.Join(spec.Dir, "supervisor.log")
	p, err := startDetached(logPath, spec.Hostname != "", "ip", "netns", "exec", ns, filepath.Join(r.State.Config.KovnBinDir, "kovn-rig"), "supervise", specFile)
	if err != nil {
		return Proc{}, err
	}
	proc := Proc{Name: spec.Name, Pid: p, Log: logPath, PidsFile: filepath.Join(spec.Dir, pidsFile)}
	r.State.Procs = append(r.State.Procs, proc)
	return proc, r.State.Save()
}

// startDetached starts a process in its own session (and with ownUTS in a UTS namespace of its
// own) with output to logPath. `ip netns exec` execs its command, so the pid returned is the
// supervisor's own.
func startDetached(logPath string, ownUTS bool, argv ...string) (int, error) {
	return startProcess(logPath, ownUTS, nil, argv...)
}

// startDetachedFiles is startDetached passing files on as descriptors 3, 4, ...
func startDetachedFiles(logPath string, files []*os.File, argv ...string) (int, error) {
	return startProcess(logPath, false, files, argv...)
}

func startProcess(logPath string, ownUTS bool, files []*os.File, argv ...string) (int, error) {
	noInheritedFDs()
	lf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return 0, err
	}
	defer lf.Close()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr, cmd.ExtraFiles = lf, lf, files
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if ownUTS {
		cmd.SysProcAttr.Cloneflags = syscall.CLONE_NEWUTS
	}
	if err := cmd.Start(); err != nil {
		return 0, err
	}
	go func() { _ = cmd.Wait() }() // reap it if it exits while we are still running
	return cmd.Process.Pid, nil
}

// waitSupervisors waits until every supervisor wrote its ready marker (beside its pids file).
func waitSupervisors(ctx context.Context, procs []Proc) error {
	for i := range procs {
		dir := filepath.Dir(procs[i].PidsFile)
		for {
			if _, err := os.Stat(filepath.Join(dir, readyMarker)); err == nil {
				break
			}
			if b, err := os.ReadFile(filepath.Join(dir, errorMarker)); err == nil {
				return fmt.Errorf("%s failed: %s", procs[i].Name, b)
			}
			if !Alive(procs[i].Pid) {
				return fmt.Errorf("%s exited during start-up (log: %s)", procs[i].Name, procs[i].Log)
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("%s not ready: %w (log: %s)", procs[i].Name, ctx.Err(), procs[i].Log)
			case <-time.After(100 * time.Millisecond):
			}
		}
	}
	return nil
}

func (r *Rig) startControlPlanes(ctx context.Context) error {
	cfg := r.State.Config
	var procs []Proc
	if err := cfg.writeOVNPKI(); err != nil {
		return fmt.Errorf("OVN certificates: %w", err)
	}
	if cfg.Interconnected() {
		spec, err := cfg.interconnectSpec()
		if err != nil {
			return err
		}
		p, err := r.launch(cfg.ICNS(), spec)
		if err != nil {
			return err
		}
		procs = append(procs, p)
	}
	tor, err := cfg.torSpec()
	if err != nil {
		return err
	}
	vfab, err := cfg.underlaySwitchSpec()
	if err != nil {
		return err
	}
	for _, l := range []struct {
		ns   string
		spec SupervisorSpec
	}{{cfg.ExtNS(), cfg.externalHostSpec()}, {cfg.ToRNS(), tor}, {cfg.OutsideNS(), cfg.outsideHostSpec()},
		{cfg.FabricNS(), vfab}, {cfg.UnderlayHostNS(), cfg.underlayHostSpec()}} {
		p, err := r.launch(l.ns, l.spec)
		if err != nil {
			return err
		}
		procs = append(procs, p)
	}
	for cl := 1; cl <= cfg.Clusters; cl++ {
		var nodes []string
		for n := 1; n <= cfg.Nodes; n++ {
			nodes = append(nodes, NodeName(cl, n))
		}
		ips := []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP("::1")}
		for _, a := range cfg.ControlPlaneIPs(cl) {
			ips = append(ips, a.AsSlice())
		}
		for _, svc := range cfg.ServiceCIDRs(cl) {
			ips = append(ips, firstServiceIP(svc).AsSlice())
		}
		pki, err := newClusterPKI(filepath.Join(cfg.ClusterDir(cl), "pki"), ips, nodes)
		if err != nil {
			return err
		}
		r.pkis[cl] = pki
		spec, err := cfg.controlPlaneSpec(cl, pki)
		if err != nil {
			return err
		}
		p, err := r.launch(cfg.ControlPlaneNS(cl), spec)
		if err != nil {
			return err
		}
		procs = append(procs, p)
	}
	return waitSupervisors(ctx, procs)
}

// firstServiceIP is the apiserver's ClusterIP in a service range.
func firstServiceIP(svc netip.Prefix) netip.Addr { return svc.Masked().Addr().Next() }

func (r *Rig) startNodes(ctx context.Context) error {
	cfg := r.State.Config
	images, err := buildImages(cfg.KovnBinDir, filepath.Join(cfg.Dir, "images"))
	if err != nil {
		return err
	}
	if err := os.MkdirAll(cfg.cniBinDir(), 0o755); err != nil {
		return err
	}
	_ = os.Symlink("/usr/lib/cni/loopback", filepath.Join(cfg.cniBinDir(), "loopback"))
	if cfg.Kovn && !cfg.Chart() {
		_ = os.Symlink(filepath.Join(cfg.KovnBinDir, "kovn-cni"), filepath.Join(cfg.cniBinDir(), "kovn-cni"))
	}
	if cfg.Chart() {
		images = append(images, cfg.ChartImage()) // the chart's install-cni puts kovn-cni in place
	}
	images = append(images, cfg.ExtraImages...)
	plugins := cfg.delegatePluginPaths()
	if cfg.BridgeNodes > 0 {
		plugins = append(plugins, bridgePlugins...)
	}
	if err := cfg.linkPlugins(plugins); err != nil {
		return err
	}
	var procs []Proc
	for cl := 1; cl <= cfg.Clusters; cl++ {
		for n := 1; n <= cfg.Nodes; n++ {
			spec, err := cfg.nodeSpec(cl, n, r.pkis[cl], images)
			if err != nil {
				return err
			}
			r.State.Cgroups = append(r.State.Cgroups, cfg.CgroupRoot(cl, n))
			p, err := r.launch(cfg.NodeNS(cl, n), spec)
			if err != nil {
				return err
			}
			procs = append(procs, p)
		}
	}
	return waitSupervisors(ctx, procs)
}
