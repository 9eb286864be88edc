//go:build bench

package bench

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ovn-org/libovsdb/client"

	"github.com/kovn/kovn/pkg/cluster/nbsync"
	"github.com/kovn/kovn/pkg/cluster/topology"
	"github.com/kovn/kovn/pkg/ovn"
	"github.com/kovn/kovn/test/bench/report"
)

// ipBlockCIDR is the ipBlock of the scenario; its exceptions are /24s inside it.
var ipBlockCIDR = netip.MustParsePrefix("10.0.0.0/8")

// ipBlockCase is one NetworkPolicy the bench installs: kovn's match for the first excepts of
// the exception list, or the "!=" match kovn wrote before (old).
type ipBlockCase struct {
	excepts int
	old     bool
}

// ipBlockCases: kovn's match at 1, 10 and 100 exceptions, and at 3 and 5 beside the old
// form. The old form stops at 5: its flows multiply with each exception (8 took 472,847
// flows and 1.1 GB of ovn-controller); 10 could take all the machine's memory.
var ipBlockCases = []ipBlockCase{{1, false}, {3, false}, {5, false}, {10, false}, {100, false}, {1, true}, {3, true}, {5, true}}

// TestIPBlockExceptFlows: what one NetworkPolicy with an ipBlock 10.0.0.0/8 and its
// exceptions (random /24s, fixed seed) costs the node: the OpenFlow flows ovn-controller
// installs in br-int and the CPU seconds it spends to install them (utime+stime of its
// /proc/PID/stat, from the policy's NB transaction until ovn-northd reports the chassis has
// caught up, `ovn-nbctl --wait=hv sync`). The policy is topology.ForNetworkPolicy's shard for
// a pod on the chassis, applied with nbsync as kovn-controller does; the old-form cases take
// the same shard with the rule's match rewritten to "ip4.src == CIDR && ip4.src != {...}".
// Each case is removed before the next, so each starts from the same flows.
//
// One chassis, no rig: NB and SB ovsdb-server, ovn-northd, the chassis' ovsdb-server,
// ovs-vswitchd with dummy netdevs only (--enable-dummy=override: no kernel interface, no tap,
// no route is touched) and ovn-controller, on unix sockets under /run; the bench starts each
// and stops it by its pid. Only this one: `make bench BENCH_RUN=TestIPBlockExceptFlows`.
func TestIPBlockExceptFlows(t *testing.T) {
	ch := startChassis(t)
	excepts := randomSlash24s(ipBlockCIDR, 100, 43)
	base := ch.sync(t)
	fmt.Printf("\n== ipBlock %s with k random /24 exceptions, one port; br-int holds %d flows without the policy\n", ipBlockCIDR, base.flows)
	fmt.Printf("| match | exceptions | prefixes | flows | flows over no policy | ovn-controller CPU | ovs-vswitchd CPU | to the chassis | ovn-controller peak RSS |\n")
	fmt.Printf("|---|---|---|---|---|---|---|---|---|\n")
	for _, c := range ipBlockCases {
		sh, prefixes := ipBlockShard(t, excepts[:c.excepts], c.old)
		before := ch.sample(t)
		start := time.Now()
		ch.apply(t, sh)
		after := ch.sync(t)
		form, named := "kovn: `== {prefixes}`", strconv.Itoa(prefixes)
		if c.old {
			form, named = "old: `== CIDR && != {excepts}`", "1 + "+strconv.Itoa(c.excepts)+" negated"
		}
		fmt.Printf("| %s | %d | %s | %d | %d | %.2f s | %.2f s | %.2f s | %.0f MiB |\n", form, c.excepts, named, after.flows, after.flows-base.flows,
			after.cpu-before.cpu, after.vswitchdCPU-before.vswitchdCPU, time.Since(start).Seconds(), float64(after.peakKiB)/1024)
		ch.apply(t, topology.Shard{OwnerType: sh.OwnerType, Owner: sh.Owner}) // removed: back to the base flows
		ch.sync(t)
	}
}

// ipBlockShard is the shard of a policy selecting the chassis' port p1, admitting ingress from
// the ipBlock with excepts, and the number of prefixes kovn's match names. With old, its rule
// matches as kovn did before: the CIDR and a negated set of the exceptions.
func ipBlockShard(t *testing.T, excepts []netip.Prefix, old bool) (topology.Shard, int) {
	in := topology.NetworkPolicyIn{Namespace: "bench", Name: "ipblock", Ingress: true, JoinCIDRs: []netip.Prefix{netip.MustParsePrefix("100.64.0.0/16")},
		Pods:         []topology.PolicyPodIn{{Port: "p1", IPs: []netip.Addr{netip.MustParseAddr("10.16.0.5")}}},
		IngressRules: []topology.PolicyRuleIn{{IPBlocks: []topology.IPBlockIn{{CIDR: ipBlockCIDR, Except: excepts}}}}}
	sh := topology.ForNetworkPolicy(in)
	head := "outport == @" + topology.PolicyPortGroup(in.Namespace, in.Name) + " && ip4 && "
	for i, a := range sh.ACLs {
		if a.ExternalIDs[topology.PolicyRuleKey] != "ingress/0" {
			continue
		}
		clause, ok := strings.CutPrefix(a.Match, head+"ip4.src == ")
		if !ok {
			t.Fatalf("rule match %q does not start with %q", a.Match, head)
		}
		if old {
			var set []string
			for _, e := range excepts {
				set = append(set, e.String())
			}
			sh.ACLs[i].Match = fmt.Sprintf("%s(ip4.src == %s && ip4.src != {%s})", head, ipBlockCIDR, strings.Join(set, ", "))
		}
		return sh, strings.Count(clause, "/")
	}
	t.Fatalf("no ingress/0 ACL in %+v", sh.ACLs)
	return sh, 0
}

// randomSlash24s returns n distinct /24s inside cidr, the same for the same seed.
func randomSlash24s(cidr netip.Prefix, n int, seed uint64) []netip.Prefix {
	rng := rand.New(rand.NewPCG(seed, 0))
	base := cidr.Masked().Addr().As4()
	seen := map[netip.Prefix]bool{}
	var out []netip.Prefix
	for len(out) < n {
		a := base
		a[1], a[2] = byte(rng.IntN(256)), byte(rng.IntN(256))
		p := netip.PrefixFrom(netip.AddrFrom4(a), 24)
		if cidr.Contains(p.Addr()) && !seen[p] {
			seen[p] = true
			out = append(out, p)
		}
	}
	return out
}

// chassis is one OVN chassis with its own central: the processes the bench started and an
// NB client.
type chassis struct {
	procs                 *simSet // start/stop by pid, sockets under /run
	nb                    client.Client
	controller, vswitchd  int // pids
	nbSock, ovsSock, mgmt string
}

// chassisSample is what the bench reads after each step.
type chassisSample struct {
	flows       int
	cpu         float64 // ovn-controller's utime+stime, seconds
	vswitchdCPU float64 // ovs-vswitchd's, which takes the flows in
	peakKiB     int64   // ovn-controller's VmHWM
}

// startChassis starts the central and the chassis, binds logical port p1 of switch ls1 to
// it and waits until the port is up.
func startChassis(t *testing.T) *chassis {
	dir, err := os.MkdirTemp(outDir(t), "ipblock-")
	if err != nil {
		t.Fatal(err)
	}
	s := &simSet{t: t, run: fmt.Sprintf("/run/kovn-ipblock-%d", os.Getpid()), dir: dir}
	if err := os.MkdirAll(s.run, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.stop)
	// ovs-vswitchd puts br-int's OpenFlow socket, and ovn-controller looks for it, in
	// OVS_RUNDIR: ours, never the host's /var/run/openvswitch.
	for _, v := range []string{"OVS_RUNDIR", "OVN_RUNDIR", "OVS_DBDIR", "OVS_LOGDIR"} {
		t.Setenv(v, s.run)
	}
	ch := &chassis{procs: s, nbSock: s.sock("", "nb"), ovsSock: s.sock("", "ovs"), mgmt: filepath.Join(s.run, "br-int.mgmt")}
	ch.startCentral(t)
	ch.startOVS(t)
	// ovn-controller 23.03 has no --unixctl: its control socket goes to OVN_RUNDIR.
	ch.controller = s.start("ovn-controller", "ovn-controller", "unix:"+ch.ovsSock)
	run(t, "ovn-nbctl", "--db=unix:"+ch.nbSock, "--timeout=60", "wait-until", "Logical_Switch_Port", "p1", "up=true")
	ctx, cancel := measureCtx()
	defer cancel()
	if ch.nb, err = ovn.ConnectNB(ctx, ovn.Config{Endpoints: []string{"unix:" + ch.nbSock}}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ch.nb.Close)
	return ch
}

// startCentral starts NB, SB and ovn-northd, with switch ls1 and its port p1.
func (ch *chassis) startCentral(t *testing.T) {
	s := ch.procs
	for _, db := range []string{"nb", "sb"} {
		file := filepath.Join(s.dir, db+".db")
		s.createDB(file, "ovn-"+db+".ovsschema")
		s.start(db, "ovsdb-server", file, "--remote=punix:"+s.sock("", db), "--unixctl="+filepath.Join(s.run, db+".ctl"))
		s.waitSocket(s.sock("", db))
	}
	s.start("northd", "ovn-northd", "--ovnnb-db=unix:"+ch.nbSock, "--ovnsb-db=unix:"+s.sock("", "sb"), "--unixctl="+filepath.Join(s.run, "northd.ctl"))
	run(t, "ovn-nbctl", "--db=unix:"+ch.nbSock, "ls-add", "ls1", "--", "lsp-add", "ls1", "p1",
		"--", "lsp-set-addresses", "p1", "0a:58:0a:10:00:05 10.16.0.5")
}

// startOVS starts the chassis' ovsdb-server and ovs-vswitchd (dummy datapath and netdevs) with
// br-int, port p1 bound to logical port p1, and the chassis identity ovn-controller reads.
func (ch *chassis) startOVS(t *testing.T) {
	s := ch.procs
	file := filepath.Join(s.dir, "conf.db")
	if out, err := exec.Command("ovsdb-tool", "create", file, "/usr/share/openvswitch/vswitch.ovsschema").CombinedOutput(); err != nil {
		t.Fatalf("ovsdb-tool create %s: %v: %s", file, err, out)
	}
	s.start("ovsdb-ovs", "ovsdb-server", file, "--remote=punix:"+ch.ovsSock, "--unixctl="+filepath.Join(s.run, "ovsdb-ovs.ctl"))
	s.waitSocket(ch.ovsSock)
	vsctl := []string{"ovs-vsctl", "--db=unix:" + ch.ovsSock, "--timeout=30"}
	run(t, append(vsctl, "--no-wait", "init")...)
	ch.vswitchd = s.start("ovs-vswitchd", "ovs-vswitchd", "unix:"+ch.ovsSock, "--enable-dummy=override", "--disable-system",
		"--disable-system-route", "--unixctl="+filepath.Join(s.run, "ovs-vswitchd.ctl"))
	run(t, append(vsctl, "add-br", "br-int",
		"--", "set", "Bridge", "br-int", "datapath_type=dummy", "fail-mode=secure", "other-config:disable-in-band=true",
		"--", "add-port", "br-int", "p1", "--", "set", "Interface", "p1", "external_ids:iface-id=p1",
		"--", "set", "Open_vSwitch", ".", "external_ids:system-id=ipblock-bench", "external_ids:ovn-remote=unix:"+s.sock("", "sb"),
		"external_ids:ovn-encap-type=geneve", "external_ids:ovn-encap-ip=127.0.0.1", "external_ids:ovn-bridge-datapath-type=dummy")...)
}

// apply writes the shard to NB as kovn-controller does.
func (ch *chassis) apply(t *testing.T, sh topology.Shard) {
	ctx, cancel := measureCtx()
	defer cancel()
	if _, err := nbsync.Apply(ctx, ch.nb, sh); err != nil {
		t.Fatalf("apply %s: %v", sh.Owner, err)
	}
}

// sync waits until the chassis has installed the flows of everything in NB so far, then samples.
func (ch *chassis) sync(t *testing.T) chassisSample {
	run(t, "ovn-nbctl", "--db=unix:"+ch.nbSock, "--timeout=110", "--wait=hv", "sync")
	return ch.sample(t)
}

func (ch *chassis) sample(t *testing.T) chassisSample {
	p, err := report.ReadProc(ch.controller)
	if err != nil {
		t.Fatalf("ovn-controller: %v", err)
	}
	v, err := report.ReadProc(ch.vswitchd)
	if err != nil {
		t.Fatalf("ovs-vswitchd: %v", err)
	}
	return chassisSample{flows: ch.flows(t), cpu: p.CPUSeconds, vswitchdCPU: v.CPUSeconds, peakKiB: p.PeakRSSKiB}
}

// flows counts br-int's OpenFlow flows (one aggregate request, not a dump of them all).
func (ch *chassis) flows(t *testing.T) int {
	out := run(t, "ovs-ofctl", "-O", "OpenFlow15", "dump-aggregate", "unix:"+ch.mgmt)
	for _, f := range strings.Fields(out) {
		if v, ok := strings.CutPrefix(f, "flow_count="); ok {
			n, err := strconv.Atoi(v)
			if err != nil {
				t.Fatalf("dump-aggregate: %q", out)
			}
			return n
		}
	}
	t.Fatalf("dump-aggregate: no flow_count in %q", out)
	return 0
}

// run runs a command to completion and returns its output, failing the test on error.
func run(t *testing.T, argv ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, argv[0], argv[1:]...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v: %s", strings.Join(argv, " "), err, out)
	}
	return string(out)
}
