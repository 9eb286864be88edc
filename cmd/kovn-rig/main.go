// Command kovn-rig brings up real multi-cluster kovn labs on one Linux host.
//
//	kovn-rig up [--clusters N] [--nodes M] [--fake-nodes F] [--bridge-nodes B] [--ic-raft] [--foreign-az] [--images TAR] [--dir DIR]
//	kovn-rig status [--dir DIR]
//	kovn-rig env CLUSTER [--dir DIR]
//	kovn-rig down [--dir DIR] [--keep-logs]
//
// Internal subcommands used by the rig itself: supervise SPEC, forward SPEC, fake-nodes SPEC,
// credentials FLAGS, cluster-dns FLAGS.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/kovn/kovn/test/rig"
)

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	cmd, args := os.Args[1], os.Args[2:]
	var err error
	switch cmd {
	case "up":
		err = up(args)
	case "down":
		err = down(args)
	case "status":
		err = status(args)
	case "env":
		err = env(args)
	case "supervise":
		err = rig.Supervise(arg0(args))
	case "forward":
		err = rig.RunForwarder(arg0(args))
	case "fake-nodes":
		err = rig.RunFakeNodes(arg0(args))
	case "credentials":
		err = credentials(args)
	case "cluster-dns":
		err = clusterDNS(args)
	case "rotate-pki":
		err = rotatePKI(args)
	default:
		usage()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "kovn-rig "+cmd+":", err)
		os.Exit(1)
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: kovn-rig up|status|env CLUSTER|rotate-pki|down [flags]  (kovn-rig CMD -h for flags)")
	os.Exit(2)
}

func arg0(args []string) string {
	if len(args) != 1 {
		usage()
	}
	return args[0]
}

func dirFlag(fs *flag.FlagSet) *string {
	def := os.Getenv("KOVN_RIG_DIR")
	if def == "" {
		def = "_output/rig"
	}
	return fs.String("dir", def, "rig state directory (env KOVN_RIG_DIR)")
}

func up(args []string) error {
	fs := flag.NewFlagSet("up", flag.ExitOnError)
	dir := dirFlag(fs)
	clusters := fs.Int("clusters", 1, "number of clusters")
	nodes := fs.Int("nodes", 2, "nodes per cluster")
	kovn := fs.Bool("kovn", true, "install kovn (controller, daemon, CNI); false gives bare clusters whose nodes stay NotReady")
	fake := fs.Int("fake-nodes", 0, "per cluster, register this many Node objects with no kubelet behind them (scale tests; pods bound to them never run)")
	bridge := fs.Int("bridge-nodes", 0, "per cluster, the last N nodes use the plain bridge + host-local CNI instead of kovn")
	family := fs.String("ip-family", rig.Dual, "address family of fabric, nodes, control planes and pods: ipv4, ipv6 or dual")
	pinger := fs.Bool("pinger", true, "with --install chart: run kovn-pinger on every node")
	centrals := fs.Int("central-nodes", 1, "with --install chart: run OVN central on this many nodes of each cluster (3: NB and SB as 3-member raft clusters)")
	install := fs.String("install", rig.InstallProcesses, "how kovn runs: processes (supervised by the rig) or chart (helm install of deploy/ onto the rig's kubelets; needs `make images`)")
	icRaft := fs.Bool("ic-raft", false, "serve IC-NB and IC-SB as 3-member raft clusters (with --clusters > 1 or --foreign-az)")
	insecure := fs.Bool("insecure-plain-tcp", false, "INSECURE: serve the OVN databases on plain TCP, every client unauthenticated (default: mutual TLS)")
	foreignAZ := fs.Bool("foreign-az", false, "add an OVN availability zone kovn does not manage (\"openstack\": a router, two VMs) joined to the rig's IC databases, which a 1-cluster rig then has too")
	var extra []string
	fs.Func("images", "a docker-archive `tarball` to import into every node as well (repeatable), e.g. _output/images/upstream-e2e.tar", func(p string) error {
		abs, err := filepath.Abs(p)
		extra = append(extra, abs)
		return err
	})
	keep := fs.Bool("keep-on-failure", false, "leave a rig that failed to come up in place for inspection")
	timeout := fs.Duration("timeout", rig.DefaultReadyTimeout, "give up if the rig is not up within this time")
	_ = fs.Parse(args)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	start := time.Now()
	r, err := rig.Up(ctx, rig.Config{Dir: *dir, Clusters: *clusters, Nodes: *nodes, ReadyTimeout: *timeout, Kovn: *kovn,
		FakeNodes: *fake, BridgeNodes: *bridge, IPFamily: *family, ICRaft: *icRaft, ForeignAZ: *foreignAZ, InsecurePlainTCP: *insecure, Install: *install, Pinger: *pinger, CentralNodes: *centrals, ExtraImages: extra})
	if err != nil {
		if r != nil && !*keep && !errors.Is(err, rig.ErrAlreadyUp) {
			fmt.Fprintf(os.Stderr, "kovn-rig up: %v\nkovn-rig up: tearing the partial rig down (use --keep-on-failure to inspect it)\n", err)
			if derr := rig.Down(*dir, true); derr != nil {
				fmt.Fprintln(os.Stderr, "kovn-rig down:", derr)
			}
			fmt.Fprintf(os.Stderr, "kovn-rig up: logs kept in %s\n", *dir)
			os.Exit(1)
		}
		return err
	}
	fmt.Printf("rig up in %.1fs: %d cluster(s) x %d node(s), %s, state in %s\n", time.Since(start).Seconds(),
		*clusters, *nodes, r.State.Config.IPFamily, r.State.Config.Dir)
	for _, c := range r.State.Clusters {
		if c.FakeNodes > 0 {
			fmt.Printf("  %s: %d fake nodes %s-f1 .. %s-f%d (no kubelet; taint %s)\n", c.Name, c.FakeNodes, c.Name, c.Name,
				c.FakeNodes, rig.FakeNodeTaint)
		}
		fmt.Printf("  %s: nodes %v  — eval \"$(kovn-rig env %s --dir %s)\"\n", c.Name, c.Nodes, c.Name, r.State.Config.Dir)
	}
	if r.State.Config.ForeignAZ {
		fmt.Printf("  foreign AZ %s (not kovn's): vm1 %s/%s, vm2 %s/%s, router port %s/%s on %s; ovn-nbctl --db=%s show\n", rig.ForeignAZName,
			rig.ForeignVM1IP, rig.ForeignVM1IP6, rig.ForeignVM2IP, rig.ForeignVM2IP6, rig.ForeignRouterTransitIP, rig.ForeignRouterTransitIP6,
			rig.ForeignTransitSwitch, r.State.Config.ForeignNBDB())
	}
	return nil
}

func down(args []string) error {
	fs := flag.NewFlagSet("down", flag.ExitOnError)
	dir := dirFlag(fs)
	keepLogs := fs.Bool("keep-logs", false, "keep log files in the state dir")
	_ = fs.Parse(args)
	start := time.Now()
	if err := rig.Down(*dir, *keepLogs); err != nil {
		return err
	}
	fmt.Printf("rig down in %.1fs\n", time.Since(start).Seconds())
	return nil
}

func status(args []string) error {
	fs := flag.NewFlagSet("status", flag.ExitOnError)
	dir := dirFlag(fs)
	_ = fs.Parse(args)
	st, err := rig.LoadState(*dir)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "COMPONENT\tHEALTH\tDETAIL\n")
	bad := 0
	for _, h := range st.Status(ctx) {
		state := "healthy"
		if !h.OK {
			state, bad = "UNHEALTHY", bad+1
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\n", h.What, state, h.Detail)
	}
	_ = tw.Flush()
	if st.UpSeconds > 0 {
		fmt.Printf("came up in %.1fs (%s) at %s\n", st.UpSeconds, st.UpPhases, st.StartedAt.Format(time.RFC3339))
	}
	if bad > 0 {
		return fmt.Errorf("%d component(s) unhealthy", bad)
	}
	return nil
}

func env(args []string) error {
	fs := flag.NewFlagSet("env", flag.ExitOnError)
	dir := dirFlag(fs)
	cluster := "c1"
	if len(args) > 0 && args[0][0] != '-' {
		cluster, args = args[0], args[1:]
	}
	_ = fs.Parse(args)
	st, err := rig.LoadState(*dir)
	if err != nil {
		return err
	}
	out, err := st.Env(cluster)
	if err != nil {
		return err
	}
	fmt.Print(out)
	return nil
}
