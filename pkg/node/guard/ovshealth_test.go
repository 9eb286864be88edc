package guard

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	libovsdb "github.com/ovn-org/libovsdb/client"
	"github.com/ovn-org/libovsdb/model"
	"github.com/ovn-org/libovsdb/ovsdb"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/kovn/kovn/pkg/cni"
	"github.com/kovn/kovn/pkg/node/peerprobe"
	"github.com/kovn/kovn/pkg/ovn"
	"github.com/kovn/kovn/pkg/ovn/model/vswitch"
	"github.com/kovn/kovn/pkg/ovn/ovntest"
)

// Captured from ovs-vswitchd 3.1.0 (--enable-dummy=override, a private database): br-int with
// flows in tables 0, 8 and 9 (one at the default priority, so without "priority="), then OVS's
// own table-254 flows. ovs-ofctl dump-flows listed 10 flows for this bridge.
const capturedDumpFlowsBrInt = `duration=58s, n_packets=2, n_bytes=160, priority=100,in_port=1,actions=resubmit(,8)
duration=58s, n_packets=0, n_bytes=0, priority=100,in_port=2,actions=resubmit(,8)
duration=1s, n_packets=0, n_bytes=0, priority=65535,in_port=4,actions=drop
table_id=8, duration=58s, n_packets=1, n_bytes=118, priority=50,ip,nw_dst=10.0.0.2,actions=output:2
table_id=8, duration=58s, n_packets=0, n_bytes=0, priority=50,ip,nw_dst=10.0.0.1,actions=output:1
table_id=8, duration=58s, n_packets=1, n_bytes=42, priority=40,arp,actions=NORMAL
table_id=8, duration=58s, n_packets=0, n_bytes=0, priority=30,udp,tp_dst=6081,actions=note:00.01.02.03.04.05.06.07.08.09.0a.0b.0c.0d.0e.0f.10.11.12.13.14.15.16.17.18.19.1a.1b.1c.1d.1e.1f.00.00.00.00.00.00,output:1
table_id=8, duration=58s, n_packets=0, n_bytes=0, priority=0,actions=drop
table_id=9, duration=1s, n_packets=0, n_bytes=0, tcp,actions=learn(table=10,idle_timeout=10,priority=65535,eth_type=0x800,NXM_OF_IP_SRC[]),output:1
table_id=9, duration=1s, n_packets=0, n_bytes=0, udp,actions=output:2
table_id=254, duration=61s, n_packets=0, n_bytes=0, priority=2,recirc_id=0,actions=drop
table_id=254, duration=61s, n_packets=0, n_bytes=0, priority=0,reg0=0x1,actions=controller(reason=)
table_id=254, duration=61s, n_packets=0, n_bytes=0, priority=0,reg0=0x2,actions=drop
table_id=254, duration=61s, n_packets=0, n_bytes=0, priority=0,reg0=0x3,actions=drop
`

// Captured the same way from a standalone bridge with an unreachable TCP controller: only
// fail-open and in-band flows (priorities above 65535) and table 254; ovs-ofctl listed none.
const capturedDumpFlowsInBand = `duration=7s, n_packets=0, n_bytes=0, priority=15790320,actions=NORMAL
duration=7s, n_packets=0, n_bytes=0, priority=180008,tcp,nw_src=127.0.0.1,tp_src=1,actions=NORMAL
duration=7s, n_packets=0, n_bytes=0, priority=180000,udp,in_port=LOCAL,dl_src=56:20:c6:9d:73:49,tp_src=68,tp_dst=67,actions=NORMAL
table_id=254, duration=33s, n_packets=0, n_bytes=0, priority=2,recirc_id=0,actions=drop
table_id=254, duration=33s, n_packets=0, n_bytes=0, priority=0,reg0=0x1,actions=controller(reason=)
`

// Captured from the same ovs-vswitchd with a system and a netdev datapath; dpctl/dump-flows
// listed 3 and 1 flows in them.
const capturedUpcallShow = `system@ovs-system:
  flows         : (current 3) (avg 0) (max 3) (limit 10000)
  dump duration : 1ms
  ufid enabled : true

  8: (keys 3)
netdev@ovs-netdev:
  flows         : (current 1) (avg 0) (max 2) (limit 10000)
  dump duration : 1ms
  ufid enabled : true

  12: (keys 1)
`

// As older OVS formats it (ofproto-dpif-upcall.c's upcall_unixctl_show indents with a tab).
const tabbedUpcallShow = "system@ovs-system:\n\tflows         : (current 7) (avg 3) (max 9) (limit 200000)\n" +
	"\tdump duration : 2ms\n\n\t0: (upcall queue 0)\n\n\t4: (keys 7)\n"

// TestCountOpenFlowFlows: the flows a controller sees are counted, table 0 (no table prefix)
// and default-priority ones included, OVS's hidden ones not; a reply without any flow line is
// an error rather than 0.
func TestCountOpenFlowFlows(t *testing.T) {
	for _, tc := range []struct {
		name, out string
		want      int
		err       bool
	}{
		{"br-int", capturedDumpFlowsBrInt, 10, false},
		{"in-band and fail-open only", capturedDumpFlowsInBand, 0, false},
		{"empty", "", 0, true},
		{"not a dump", "Unknown bridge\n", 0, true},
		{"no newline at the end", "duration=1s, n_packets=0, n_bytes=0, priority=1,actions=drop", 1, false},
	} {
		got, err := countOpenFlowFlows(tc.out)
		if (err != nil) != tc.err || got != tc.want {
			t.Errorf("%s: %d, %v; want %d, error %v", tc.name, got, err, tc.want, tc.err)
		}
	}
}

// TestParseUpcallShowFlows: the datapaths' current counts are summed, whatever the indent;
// a reply without a count is an error rather than 0.
func TestParseUpcallShowFlows(t *testing.T) {
	for _, tc := range []struct {
		name, out string
		want      int
		err       bool
	}{
		{"two datapaths", capturedUpcallShow, 4, false},
		{"tab indent", tabbedUpcallShow, 7, false},
		{"empty", "", 0, true},
		{"no current", "system@ovs-system:\n  flows : 3\n", 0, true},
		{"not a number", "system@ovs-system:\n  flows         : (current x) (avg 0)\n", 0, true},
	} {
		got, err := parseUpcallShowFlows(tc.out)
		if (err != nil) != tc.err || got != tc.want {
			t.Errorf("%s: %d, %v; want %d, error %v", tc.name, got, err, tc.want, tc.err)
		}
	}
}

// gathered collects c through a pedantic registry (which checks the metrics against
// Describe) and returns each sample as name{label="value",...} → value.
func gathered(t *testing.T, c prometheus.Collector) map[string]float64 {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	if err := reg.Register(c); err != nil {
		t.Fatal(err)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			var labels []string
			for _, l := range m.GetLabel() {
				labels = append(labels, fmt.Sprintf("%s=%q", l.GetName(), l.GetValue()))
			}
			out[mf.GetName()+"{"+strings.Join(labels, ",")+"}"] = m.GetGauge().GetValue()
		}
	}
	return out
}

// addInterfaces adds each interface to br-int on a port of its own.
func addInterfaces(t *testing.T, c libovsdb.Client, ifaces ...*vswitch.Interface) {
	t.Helper()
	ctx := context.Background()
	br, err := ovn.Get(ctx, c, &vswitch.Bridge{Name: cni.DefaultBridge})
	if err != nil {
		t.Fatal(err)
	}
	var ops []ovsdb.Operation
	for _, i := range ifaces {
		i.UUID = ovn.NewNamedUUID()
		p := &vswitch.Port{UUID: ovn.NewNamedUUID(), Name: i.Name, Interfaces: []string{i.UUID}}
		create, err := c.Create(i, p)
		if err != nil {
			t.Fatal(err)
		}
		if ops, err = ovn.MutateOps(c, append(ops, create...), br, model.Mutation{
			Field: &br.Ports, Mutator: ovsdb.MutateOperationInsert, Value: []string{p.UUID}}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := ovn.Transact(ctx, c, ops); err != nil {
		t.Fatal(err)
	}
}

// TestOVSHealthTunnels: every geneve, vxlan or stt interface is a tunnel; a tunnel with a BFD
// state is up only when that state is up and it forwards (if OVS says); one without BFD is
// counted but not listed; a non-tunnel's BFD is ignored; while the database does not answer,
// no tunnel series at all.
func TestOVSHealthTunnels(t *testing.T) {
	c := mirrorOVS(t)
	bfd := func(state, forwarding string) map[string]string {
		m := map[string]string{"state": state, "remote_state": state, "diagnostic": "No Diagnostic", "flap_count": "0"}
		if forwarding != "" {
			m["forwarding"] = forwarding
		}
		return m
	}
	tunnel := func(typ, name, ip string, status map[string]string) *vswitch.Interface {
		return &vswitch.Interface{Name: name, Type: typ, Options: map[string]string{"remote_ip": ip, "key": "flow"}, BFDStatus: status}
	}
	addInterfaces(t, c,
		tunnel("geneve", "ovn-gw1-0", "172.18.0.3", bfd("up", "true")),
		tunnel("geneve", "ovn-gw2-0", "172.18.0.4", bfd("up", "false")), // up, yet not forwarding
		tunnel("geneve", "ovn-gw3-0", "172.18.0.5", bfd("down", "false")),
		tunnel("stt", "ovn-gw4-0", "172.18.0.6", bfd("up", "")), // no forwarding key: the state alone
		tunnel("vxlan", "ovn-gw5-0", "172.18.0.7", bfd("init", "false")),
		tunnel("geneve", "ovn-wk1-0", "172.18.0.8", nil),
		&vswitch.Interface{Name: "veth1", BFDStatus: bfd("up", "true")},
		&vswitch.Interface{Name: "gre0", Type: "gre", Options: map[string]string{"remote_ip": "172.18.0.9"}})
	want := map[string]float64{
		`kovn_node_tunnels{}`: 6,
		`kovn_node_tunnel_bfd_up{interface="ovn-gw1-0",remote_ip="172.18.0.3"}`: 1,
		`kovn_node_tunnel_bfd_up{interface="ovn-gw2-0",remote_ip="172.18.0.4"}`: 0,
		`kovn_node_tunnel_bfd_up{interface="ovn-gw3-0",remote_ip="172.18.0.5"}`: 0,
		`kovn_node_tunnel_bfd_up{interface="ovn-gw4-0",remote_ip="172.18.0.6"}`: 1,
		`kovn_node_tunnel_bfd_up{interface="ovn-gw5-0",remote_ip="172.18.0.7"}`: 0,
		`kovn_node_tunnels_bfd{state="up"}`:                                     3,
		`kovn_node_tunnels_bfd{state="down"}`:                                   1,
		`kovn_node_tunnels_bfd{state="init"}`:                                   1,
		`kovn_node_tunnels_bfd{state="admin_down"}`:                             0,
	}
	live := true
	o := &ovsHealth{db: c, dbLive: func() bool { return live }, bridge: cni.DefaultBridge, timeout: time.Second}
	var got map[string]float64
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if got = gathered(t, o); maps.Equal(got, want) {
			break // the client's cache has the rows
		}
	}
	if !maps.Equal(got, want) {
		t.Fatalf("got\n%s\nwant\n%s", dumpSamples(got), dumpSamples(want))
	}
	if problems, err := testutil.CollectAndLint(o); err != nil || len(problems) > 0 {
		t.Errorf("lint: %v %v", problems, err)
	}
	// The node condition's reading: the five sessions, three not up and forwarding.
	h := &NodeHealth{OVSClient: c}
	if read, n, notUp := h.bfdSessions(context.Background()); !read || n != 5 || notUp != "172.18.0.4,172.18.0.5,172.18.0.7" {
		t.Errorf("bfdSessions: read %v, %d sessions, not up %q", read, n, notUp)
	}
	live = false
	if got := gathered(t, o); len(got) != 0 {
		t.Errorf("database not answering: want no series, got\n%s", dumpSamples(got))
	}
}

func dumpSamples(m map[string]float64) string {
	var lines []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		lines = append(lines, fmt.Sprintf("  %s %v", k, m[k]))
	}
	return strings.Join(lines, "\n")
}

// fakeVswitchd answers unixctl requests on a socket of its own: replies maps a command to its
// result, or to an error for an error reply; a command it does not map is never answered.
func fakeVswitchd(t *testing.T, replies map[string]any) string {
	return ovntest.ServeUnixctl(t, func(command string) any { return replies[command] })
}

// TestOVSHealthFlows: both counts come from ovs-vswitchd's replies; a refused, unparsable or
// unanswered read, or no socket at all, leaves its series out instead of exporting 0, and a
// hung ovs-vswitchd does not hold the scrape past the timeout.
func TestOVSHealthFlows(t *testing.T) {
	ctl := fakeVswitchd(t, map[string]any{
		"bridge/dump-flows br-int": capturedDumpFlowsBrInt,
		"bridge/dump-flows br-ex":  errors.New("Unknown bridge"),
		"upcall/show":              capturedUpcallShow,
	})
	o := &ovsHealth{ctl: VswitchdSocket{Ctl: ctl}, bridge: cni.DefaultBridge, timeout: 300 * time.Millisecond}
	want := map[string]float64{`kovn_node_openflow_flows{bridge="br-int"}`: 10, `kovn_node_datapath_flows{}`: 4}
	if got := gathered(t, o); !maps.Equal(got, want) {
		t.Errorf("got\n%s\nwant\n%s", dumpSamples(got), dumpSamples(want))
	}
	o.bridge = "br-ex"
	want = map[string]float64{`kovn_node_datapath_flows{}`: 4}
	if got := gathered(t, o); !maps.Equal(got, want) {
		t.Errorf("unknown bridge: got\n%s\nwant\n%s", dumpSamples(got), dumpSamples(want))
	}
	o.ctl.Ctl = fakeVswitchd(t, map[string]any{"bridge/dump-flows br-int": "Unknown bridge\n"}) // upcall/show hangs
	o.bridge = cni.DefaultBridge
	start := time.Now()
	if got := gathered(t, o); len(got) != 0 {
		t.Errorf("unparsable and hung: want no series, got\n%s", dumpSamples(got))
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("a hung ovs-vswitchd held the scrape %v", took)
	}
	o.ctl = VswitchdSocket{RunDir: t.TempDir()} // no pidfile: no socket to ask
	if got := gathered(t, o); len(got) != 0 {
		t.Errorf("no ovs-vswitchd: want no series, got\n%s", dumpSamples(got))
	}
}

// realVswitchd starts a private ovsdb-server and ovs-vswitchd on dummy datapaths, as OVS's own
// testsuite does (--enable-dummy=override: no kernel datapath, no host interface); everything
// lives in a temporary directory. Fails, naming it, where OVS is not installed.
func realVswitchd(t *testing.T) (db, ctl string, env []string) {
	t.Helper()
	const schema = "/usr/share/openvswitch/vswitch.ovsschema"
	for _, bin := range []string{"ovsdb-tool", "ovsdb-server", "ovs-vswitchd", "ovs-vsctl", "ovs-ofctl", "ovs-appctl"} {
		if _, err := exec.LookPath(bin); err != nil {
			t.Fatalf("%s not installed (make deps installs openvswitch)", bin)
		}
	}
	if _, err := os.Stat(schema); err != nil {
		t.Fatalf("%v (make deps installs openvswitch-common)", err)
	}
	dir := t.TempDir()
	env = append(os.Environ(), "OVS_RUNDIR="+dir, "OVS_DBDIR="+dir, "OVS_LOGDIR="+dir, "OVS_SYSCONFDIR="+dir)
	start := func(name, sock string, args ...string) {
		cmd := exec.Command(name, append(args, "--pidfile="+filepath.Join(dir, name+".pid"),
			"--log-file="+filepath.Join(dir, name+".log"), "-vconsole:off")...)
		cmd.Env = env
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
			if _, err := os.Stat(sock); err == nil {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s made no %s in 10 s", name, sock)
			}
		}
	}
	if out, err := exec.Command("ovsdb-tool", "create", filepath.Join(dir, "conf.db"), schema).CombinedOutput(); err != nil {
		t.Fatalf("ovsdb-tool: %v %s", err, out)
	}
	sock := filepath.Join(dir, "db.sock")
	start("ovsdb-server", sock, filepath.Join(dir, "conf.db"), "--remote=punix:"+sock, "--unixctl="+filepath.Join(dir, "ovsdb-server.ctl"))
	db, ctl = "unix:"+sock, filepath.Join(dir, "vswitchd.ctl")
	ovsCmd(t, env, "ovs-vsctl", "--db="+db, "--no-wait", "init")
	start("ovs-vswitchd", ctl, db, "--enable-dummy=override", "--disable-system", "--unixctl="+ctl)
	return db, ctl, env
}

func ovsCmd(t *testing.T, env []string, name string, args ...string) {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Env = env
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s %v: %v %s", name, args, err, out)
	}
}

// TestOVSHealthRealVswitchd reads a real ovs-vswitchd and database: its OpenFlow flows without
// its own hidden ones, the megaflow one packet made, and the BFD state ovs-vswitchd itself
// writes for a tunnel whose peer never answers.
func TestOVSHealthRealVswitchd(t *testing.T) {
	db, ctl, env := realVswitchd(t)
	ovsCmd(t, env, "ovs-vsctl", "--db="+db, "--timeout=10", "add-br", "br-int", "--", "set", "bridge", "br-int", "fail-mode=secure",
		"--", "add-port", "br-int", "p1", "--", "set", "interface", "p1", "type=dummy", "ofport_request=1",
		"--", "add-port", "br-int", "ovn-gw1-0", "--", "set", "interface", "ovn-gw1-0", "type=geneve",
		"options:remote_ip=172.18.0.3", "options:key=flow", "bfd:enable=true",
		"--", "add-port", "br-int", "ovn-wk1-0", "--", "set", "interface", "ovn-wk1-0", "type=geneve",
		"options:remote_ip=172.18.0.4", "options:key=flow")
	mgmt := filepath.Join(filepath.Dir(ctl), "br-int.mgmt")
	for _, f := range []string{"priority=100,in_port=1,actions=resubmit(,8)", "table=8,priority=0,actions=drop", "table=8,ip,actions=drop"} {
		ovsCmd(t, env, "ovs-ofctl", "add-flow", mgmt, f)
	}
	ovsCmd(t, env, "ovs-appctl", "-t", ctl, "netdev-dummy/receive", "p1", "in_port(1),eth(src=50:54:00:00:00:01,dst=50:54:00:00:00:02),"+
		"eth_type(0x0800),ipv4(src=10.0.0.1,dst=10.0.0.2,proto=6,tos=0,ttl=64,frag=no),tcp(src=8,dst=9)")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := ovn.ConnectOVS(ctx, ovn.Config{Endpoints: []string{db}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	h := &NodeHealth{OVSClient: c, VswitchdCtl: ctl} // as kovn-daemon wires it: br-int by default
	if err := h.Register(prometheus.NewPedanticRegistry()); err != nil {
		t.Fatal(err)
	}
	o := h.ovsHealth()
	want := map[string]float64{
		`kovn_node_openflow_flows{bridge="br-int"}`:                             3,
		`kovn_node_datapath_flows{}`:                                            1,
		`kovn_node_tunnels{}`:                                                   2,
		`kovn_node_tunnel_bfd_up{interface="ovn-gw1-0",remote_ip="172.18.0.3"}`: 0,
		`kovn_node_tunnels_bfd{state="up"}`:                                     0,
		`kovn_node_tunnels_bfd{state="down"}`:                                   1,
		`kovn_node_tunnels_bfd{state="init"}`:                                   0,
		`kovn_node_tunnels_bfd{state="admin_down"}`:                             0,
	}
	var got map[string]float64
	// ovs-vswitchd writes bfd_status a moment after the port appears, and upcall/show's count
	// is refreshed every 100 ms: wait for both (the megaflow idles out only after 10 s).
	for deadline := time.Now().Add(8 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if got = gathered(t, o); maps.Equal(got, want) {
			return
		}
	}
	t.Fatalf("got\n%s\nwant\n%s", dumpSamples(got), dumpSamples(want))
}

// The interconnect probes' tunnels (peerprobe) are not OVN's: their sessions say whether
// other clusters can be reached, so they count neither in the node's tunnel health nor for
// the gateway guard.
func TestOVNTunnelExcludesProbes(t *testing.T) {
	ovnGeneve := &vswitch.Interface{Name: "ovn-c1-n2-0", Type: "geneve"}
	probe := &vswitch.Interface{Name: "kovnpeer-abcdef", Type: "geneve", ExternalIDs: ovn.OwnerIDs(peerprobe.OwnerType, "az2", nil)}
	internal := &vswitch.Interface{Name: "ovn0", Type: "internal"}
	if !ovnTunnel(ovnGeneve) || ovnTunnel(probe) || ovnTunnel(internal) {
		t.Fatalf("ovnTunnel: OVN's %t, probe %t, internal %t; want true, false, false",
			ovnTunnel(ovnGeneve), ovnTunnel(probe), ovnTunnel(internal))
	}
}
