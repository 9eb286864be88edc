package cleanup

import (
	"context"
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
	"github.com/vishvananda/netlink"

	"github.com/kovn/kovn/pkg/cni"
	"github.com/kovn/kovn/pkg/hostnet"
	"github.com/kovn/kovn/pkg/hostnet/netnstest"
	"github.com/kovn/kovn/pkg/node/bootstrap"
	"github.com/kovn/kovn/pkg/node/servicenat"
	"github.com/kovn/kovn/pkg/ovn"
	"github.com/kovn/kovn/pkg/ovn/model/vswitch"
	"github.com/kovn/kovn/pkg/ovn/ovntest"
	"github.com/kovn/kovn/pkg/underlay"
)

// cleanupOVSDB serves an in-memory Open_vSwitch database whose root row has rootIDs, and
// returns its endpoint (for Node's own connection) and a client for the test.
func cleanupOVSDB(ctx context.Context, t *testing.T, rootIDs map[string]string) (string, libovsdb.Client) {
	t.Helper()
	db, err := vswitch.DatabaseModel()
	if err != nil {
		t.Fatal(err)
	}
	endpoint := ovntest.Serve(t, ovntest.SocketPath(t), db)
	ovs, err := ovn.ConnectOVS(ctx, ovn.Config{Endpoints: []string{endpoint}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ovs.Close)
	ops, err := ovs.Create(&vswitch.OpenvSwitch{UUID: ovn.NewNamedUUID(), ExternalIDs: rootIDs})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ovn.Transact(ctx, ovs, ops); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the Open_vSwitch row in the cache", func() bool { _, err := openVSwitchRow(ctx, ovs); return err == nil })
	return endpoint, ovs
}

// addOVSBridge adds a bare bridge (no ports) to the database.
func addOVSBridge(ctx context.Context, t *testing.T, ovs libovsdb.Client, name string, ids map[string]string) {
	t.Helper()
	root, err := openVSwitchRow(ctx, ovs)
	if err != nil {
		t.Fatal(err)
	}
	br := &vswitch.Bridge{UUID: ovn.NewNamedUUID(), Name: name, ExternalIDs: ids}
	ops, err := ovs.Create(br)
	if err != nil {
		t.Fatal(err)
	}
	mut, err := ovs.Where(root).Mutate(root, model.Mutation{Field: &root.Bridges, Mutator: ovsdb.MutateOperationInsert, Value: []string{br.UUID}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ovn.Transact(ctx, ovs, append(ops, mut...)); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "bridge "+name+" in the cache", func() bool { _, err := ovn.Get(ctx, ovs, &vswitch.Bridge{Name: name}); return err == nil })
}

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// cleanupDirs makes the CNI conf, CNI bin and run dirs with kovn's files and someone else's.
func cleanupDirs(t *testing.T) Options {
	t.Helper()
	root := t.TempDir()
	opts := Options{CNIConfDir: filepath.Join(root, "net.d"), CNIBinDir: filepath.Join(root, "bin"), RunDir: filepath.Join(root, "run")}
	for _, f := range []string{
		filepath.Join(opts.CNIConfDir, bootstrap.CNIConfigFile), filepath.Join(opts.CNIConfDir, "10-other.conflist"),
		filepath.Join(opts.CNIBinDir, CNIBinary), filepath.Join(opts.CNIBinDir, "bridge"),
		filepath.Join(opts.RunDir, "cni.sock"), filepath.Join(opts.RunDir, "kovn-speaker.running"),
	} {
		if err := os.MkdirAll(filepath.Dir(f), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(f, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return opts
}

// runCleanup runs Node twice, as a retried hook would: the first run must succeed,
// the second must find nothing. It returns the first run's report.
func runCleanup(t *testing.T, opts Options) Report {
	t.Helper()
	opts.linkGrace = 200 * time.Millisecond // no ovs-vswitchd here: the veth stand-ins are deleted directly
	opts.Out = testLog{t}
	rep, err := Node(context.Background(), opts)
	if err != nil {
		t.Fatalf("cleanup: %v\nreport: %+v", err, rep)
	}
	again, err := Node(context.Background(), opts)
	if err != nil || len(again.Removed) > 0 || len(again.Failed) > 0 {
		t.Errorf("second cleanup: %v, removed %q, failed %q; want nothing left to do", err, again.Removed, again.Failed)
	}
	return rep
}

// testLog writes the cleanup's lines to the test log.
type testLog struct{ t *testing.T }

func (l testLog) Write(p []byte) (int, error) {
	l.t.Helper()
	l.t.Log(strings.TrimSuffix(string(p), "\n"))
	return len(p), nil
}

func reported(lines []string, part string) bool {
	return slices.ContainsFunc(lines, func(l string) bool { return strings.Contains(l, part) })
}

// Every chain named KOVN-* goes, in both families and every table, with the jumps to it (from
// built-in chains and someone else's); every other rule and chain stays.
func TestCleanupNodeRemovesKovnChainsOnly(t *testing.T) {
	netnstest.Do(t, func() {
		ipt := func(tool string, args ...string) {
			t.Helper()
			if out, err := exec.Command(tool, args...).CombinedOutput(); err != nil {
				t.Fatalf("%s %v: %v %s", tool, args, err, out)
			}
		}
		if err := servicenat.SyncNAT(prefixes("10.16.0.0/16", "fd00:10:16::/64"), prefixes("10.16.0.0/16", "fd00:10:16::/64")); err != nil {
			t.Fatal(err)
		}
		foreign := map[string][]string{}
		for _, fam := range []struct {
			tool string
			is4  bool
			src  string
		}{{"iptables", true, "192.0.2.0/24"}, {"ip6tables", false, "2001:db8::/64"}} {
			if err := servicenat.SyncOwnPodsSet(fam.is4, addrList("10.16.0.9", "fd00:10:16::9")); err != nil {
				t.Fatal(err)
			}
			if err := servicenat.ApplyNodePortRules(fam.is4, servicenat.NodePortRules(fam.is4, []servicenat.NodePortService{webCluster, webLocal}, servicenat.NodeSide{})); err != nil {
				t.Fatal(err)
			}
			if err := servicenat.ApplyHostPortRules(fam.is4, servicenat.HostPortRules(fam.is4, []servicenat.HostPortMapping{hpTCP}, nil)); err != nil {
				t.Fatal(err)
			}
			// A chain an older kovn left, jumped to from someone else's chain; foreign rules.
			ipt(fam.tool, "-t", "nat", "-N", "KOVN-OLD")
			ipt(fam.tool, "-t", "nat", "-N", "FOREIGN")
			ipt(fam.tool, "-t", "nat", "-A", "FOREIGN", "-p", "tcp", "-g", "KOVN-OLD")
			ipt(fam.tool, "-t", "nat", "-A", "PREROUTING", "-j", "FOREIGN")
			ipt(fam.tool, "-t", "nat", "-A", "POSTROUTING", "-s", fam.src, "-m", "comment", "--comment", "not -j KOVN-POSTROUTING", "-j", "ACCEPT")
			ipt(fam.tool, "-t", "filter", "-A", "INPUT", "-s", fam.src, "-j", "ACCEPT")
			foreign[fam.tool] = []string{"-A PREROUTING -j FOREIGN", "-A POSTROUTING -s " + fam.src, "-A INPUT -s " + fam.src + " -j ACCEPT", ":FOREIGN"}
		}
		opts := cleanupDirs(t)
		opts.OVSDB, _ = cleanupOVSDB(context.Background(), t, nil)
		rep := runCleanup(t, opts)
		if left, err := hostnet.AddrSetNames("KOVN-"); err != nil || len(left) > 0 {
			t.Errorf("ipsets left: %v %v", left, err)
		}
		for tool, keep := range foreign {
			out, err := exec.Command(tool + "-save").Output()
			if err != nil {
				t.Fatal(err)
			}
			if left := parseKovnTables(string(out)); len(left) > 0 {
				t.Errorf("%s: kovn chains or jumps left: %+v\n%s", tool, left, out)
			}
			for _, k := range keep {
				if !strings.Contains(string(out), k) {
					t.Errorf("%s: someone else's %q is gone:\n%s", tool, k, out)
				}
			}
		}
		for _, want := range []string{"IPv4 iptables nat chain KOVN-POSTROUTING, jumped to from POSTROUTING",
			"IPv6 iptables filter chain KOVN-NODEPORT-REJECT, jumped to from INPUT, FORWARD", "IPv6 iptables nat chain KOVN-OLD, jumped to from FOREIGN",
			"ipset KOVN-OWN-PODS4", "ipset KOVN-OWN-PODS6"} {
			if !reported(rep.Removed, want) {
				t.Errorf("report lacks %q: %q", want, rep.Removed)
			}
		}
	})
}

// kovnNode is a node as kovn-daemon leaves it, inside the test's netns and database.
type kovnNode struct {
	ovs   libovsdb.Client
	nic   underlay.NICConfig // eth1's, now on br-phys
	podIf string
}

// plumbKovnNode builds the node: ovn0 (a veth stand-in) with kovn's routes, a pod's veth,
// br-int with ovn0 and the pod's port, a provider bridge holding eth1's configuration and its
// mapping, an admin's bridge and mapping, and the chassis identity.
func plumbKovnNode(ctx context.Context, t *testing.T, ovs libovsdb.Client) kovnNode {
	t.Helper()
	ip := netnstest.IPCmd(t)
	n := kovnNode{ovs: ovs, podIf: cni.HostIfName("0123456789abcdef")}
	for _, l := range [][2]string{{bootstrap.Ovn0, "ovn0p"}, {n.podIf, "pod0"}, {"eth1", "eth1p"}, {"br-phys", "br-physp"}} {
		ip("link", "add", l[0], "type", "veth", "peer", "name", l[1])
		ip("link", "set", l[0], "up")
		ip("link", "set", l[1], "up")
	}
	ip("addr", "add", "100.64.0.2/16", "dev", bootstrap.Ovn0)
	ip("addr", "add", "fd00:100:64::2/112", "dev", bootstrap.Ovn0, "nodad")
	ovn0, err := netlink.LinkByName(bootstrap.Ovn0)
	if err != nil {
		t.Fatal(err)
	}
	if err := bootstrap.SyncRoutes(ovn0, prefixes("10.16.0.0/16", "10.96.0.0/12", "fd00:10:16::/64"), addrList("100.64.0.1", "fd00:100:64::1")); err != nil {
		t.Fatal(err)
	}
	ip("addr", "add", "192.0.2.10/24", "dev", "eth1")
	ip("route", "add", "198.51.100.0/24", "via", "192.0.2.1", "dev", "eth1")
	eth1, _ := netlink.LinkByName("eth1")
	brPhys, _ := netlink.LinkByName("br-phys")
	if n.nic, err = underlay.ReadNICConfig(eth1); err != nil {
		t.Fatal(err)
	}
	if err := underlay.MoveConfig(n.nic, eth1, brPhys, false); err != nil {
		t.Fatal(err)
	}
	addOVSBridge(ctx, t, ovs, cni.DefaultBridge, nil)
	ports := cni.NewOVSAttacher(ovs, cni.DefaultBridge)
	if err := ports.AttachInternal(ctx, bootstrap.Ovn0, "node-n1", "0a:00:00:00:00:02"); err != nil {
		t.Fatal(err)
	}
	if err := ports.Attach(ctx, n.podIf, "web.ns", map[string]string{cni.ExtIDPodNamespace: "ns", cni.ExtIDPodName: "web"}); err != nil {
		t.Fatal(err)
	}
	if err := underlay.CreateBridge(ctx, ovs, "phys", "eth1", eth1.Attrs().HardwareAddr.String(), "", n.nic); err != nil {
		t.Fatal(err)
	}
	addOVSBridge(ctx, t, ovs, "br-lab", nil)
	waitUntil(t, "br-phys in the cache", func() bool { bs, _ := underlay.Bridges(ctx, ovs); return len(bs) == 1 })
	if err := underlay.SetMappings(ctx, ovs, []underlay.Want{{Provider: "phys", NIC: "eth1"}}, nil); err != nil {
		t.Fatal(err)
	}
	return n
}

// The whole node goes back to how it was before kovn: the provider NIC has its addresses and
// routes, kovn's bridges, ports, links, routes, mappings, daemon-only external_ids and files are
// gone; what others made (a bridge, a mapping, CNI files, routes) stays, and so does the
// chassis identity the OVS pod also writes.
func TestCleanupNodeRemovesKovnNodeState(t *testing.T) {
	// No ovs-vswitchd serves the in-memory database: the give-back's wait for it would only
	// time out.
	defer func(d time.Duration) { underlay.VswitchdTimeout = d }(underlay.VswitchdTimeout)
	underlay.VswitchdTimeout = 50 * time.Millisecond
	netnstest.Do(t, func() {
		ctx := context.Background()
		endpoint, ovs := cleanupOVSDB(ctx, t, map[string]string{"system-id": "n1", "ovn-encap-ip": "192.0.2.10",
			"ovn-is-interconn": "true", bootstrap.TransitKeysID: "ts:5", underlay.BridgeMappingsKey: "lab:br-lab,gone:br-gone"})
		n := plumbKovnNode(ctx, t, ovs)
		opts := cleanupDirs(t)
		opts.OVSDB = endpoint
		rep := runCleanup(t, opts)

		for _, name := range []string{bootstrap.Ovn0, n.podIf, "br-phys"} {
			if linkExists(name) {
				t.Errorf("kernel link %s is still there", name)
			}
		}
		if routes, _ := netlink.RouteListFiltered(netlink.FAMILY_ALL, &netlink.Route{Protocol: bootstrap.RouteProtocol}, netlink.RT_FILTER_PROTOCOL); len(routes) > 0 {
			t.Errorf("kovn's routes left: %v", routes)
		}
		eth1, err := netlink.LinkByName("eth1")
		if err != nil {
			t.Fatal(err)
		}
		if back, _ := underlay.ReadNICConfig(eth1); !slices.Equal(back.Addrs, n.nic.Addrs) || len(back.Routes) != len(n.nic.Routes) {
			t.Errorf("eth1 has %+v back, want %+v", back, n.nic)
		}
		checkCleanedOVS(ctx, t, ovs)
		for _, gone := range []string{filepath.Join(opts.CNIConfDir, bootstrap.CNIConfigFile), filepath.Join(opts.CNIBinDir, CNIBinary),
			filepath.Join(opts.RunDir, "cni.sock"), filepath.Join(opts.RunDir, "kovn-speaker.running")} {
			if _, err := os.Stat(gone); !os.IsNotExist(err) {
				t.Errorf("%s is still there (%v)", gone, err)
			}
		}
		for _, kept := range []string{filepath.Join(opts.CNIConfDir, "10-other.conflist"), filepath.Join(opts.CNIBinDir, "bridge"), opts.RunDir} {
			if _, err := os.Stat(kept); err != nil {
				t.Errorf("someone else's %s is gone: %v", kept, err)
			}
		}
		for _, want := range []string{"CNI config", "route 10.96.0.0/12 via 100.64.0.1 dev ovn0", "provider bridge br-phys (provider phys, NIC eth1); eth1 has its addresses [192.0.2.10/24] and routes [198.51.100.0/24] back",
			"entry phys:br-phys", "entry gone:br-gone", "OVS bridge br-int with its 2 ports, 1 of them pods'", "kernel link ovn0",
			"kernel link " + n.podIf + " (veth of pod ns/web)", "kernel link br-phys", "external_ids:ovn-is-interconn=true"} {
			if !reported(rep.Removed, want) {
				t.Errorf("report lacks %q:\n%s", want, strings.Join(rep.Removed, "\n"))
			}
		}
		if !reported(rep.Left, "external_ids:system-id=n1") {
			t.Errorf("the shared chassis identity is not reported as left: %q", rep.Left)
		}
	})
}

// checkCleanedOVS: only the admin's bridge and mapping, and the shared chassis identity, remain.
func checkCleanedOVS(ctx context.Context, t *testing.T, ovs libovsdb.Client) {
	t.Helper()
	var bridges []vswitch.Bridge
	waitUntil(t, "the cleanup's changes in the test's cache", func() bool {
		root, err := openVSwitchRow(ctx, ovs)
		return ovs.List(ctx, &bridges) == nil && len(bridges) == 1 && err == nil && root.ExternalIDs["ovn-is-interconn"] == ""
	})
	if bridges[0].Name != "br-lab" {
		t.Errorf("bridges left %+v, want br-lab only", bridges)
	}
	var ports []vswitch.Port
	if err := ovs.List(ctx, &ports); err != nil || len(ports) != 0 {
		t.Errorf("ports left: %+v %v", ports, err)
	}
	root, _ := openVSwitchRow(ctx, ovs)
	want := map[string]string{"system-id": "n1", "ovn-encap-ip": "192.0.2.10", underlay.BridgeMappingsKey: "lab:br-lab"}
	if len(root.ExternalIDs) != len(want) {
		t.Errorf("external_ids %v, want %v", root.ExternalIDs, want)
	}
	for k, v := range want {
		if root.ExternalIDs[k] != v {
			t.Errorf("external_ids %v, want %v", root.ExternalIDs, want)
		}
	}
}

// A failing item is reported and named in the error, and every other item is still done: an
// unreachable database leaves the files, routes and ovn0 to go; a provider bridge whose NIC
// record is unreadable is kept (its record is the only copy) while the rest of OVS is cleaned.
func TestCleanupNodeGoesOnPastFailures(t *testing.T) {
	t.Run("database unreachable", func(t *testing.T) {
		netnstest.Do(t, func() {
			ip := netnstest.IPCmd(t)
			ip("link", "add", bootstrap.Ovn0, "type", "veth", "peer", "name", "ovn0p")
			opts := cleanupDirs(t)
			opts.OVSDB, opts.ConnectTimeout, opts.linkGrace = "unix:"+ovntest.SocketPath(t), 300*time.Millisecond, 100*time.Millisecond
			rep, err := Node(context.Background(), opts)
			if err == nil || !strings.Contains(err.Error(), "Open_vSwitch database") || len(rep.Failed) != 1 {
				t.Fatalf("cleanup without a database: %v (failed %q), want the database named as the one failure", err, rep.Failed)
			}
			if linkExists(bootstrap.Ovn0) || !reported(rep.Removed, "CNI config") || !reported(rep.Removed, "run dir entry") {
				t.Errorf("the other items were not done: removed %q", rep.Removed)
			}
		})
	})
	t.Run("unreadable NIC record", func(t *testing.T) {
		netnstest.Do(t, func() {
			ctx := context.Background()
			endpoint, ovs := cleanupOVSDB(ctx, t, nil)
			addOVSBridge(ctx, t, ovs, "br-bad", ovn.OwnerIDs(underlay.OwnerType, "bad", map[string]string{underlay.NICKey: "eth9", underlay.NICConfigKey: "{"}))
			addOVSBridge(ctx, t, ovs, "br-gone", ovn.OwnerIDs(underlay.OwnerType, "gone", map[string]string{underlay.NICKey: "eth8"}))
			addOVSBridge(ctx, t, ovs, cni.DefaultBridge, nil)
			opts := cleanupDirs(t)
			opts.OVSDB = endpoint
			rep, err := Node(ctx, opts)
			if err == nil || !strings.Contains(err.Error(), "provider bridge br-bad") || len(rep.Failed) != 1 {
				t.Fatalf("cleanup: %v (failed %q), want br-bad named as the one failure", err, rep.Failed)
			}
			if !reported(rep.Removed, "provider bridge br-gone") || !reported(rep.Removed, "OVS bridge br-int") {
				t.Errorf("the other bridges were not removed: %q", rep.Removed)
			}
			waitUntil(t, "br-int gone from the test's cache", func() bool {
				_, err := ovn.Get(ctx, ovs, &vswitch.Bridge{Name: cni.DefaultBridge})
				return err != nil
			})
			if _, err := ovn.Get(ctx, ovs, &vswitch.Bridge{Name: "br-bad"}); err != nil {
				t.Errorf("br-bad, whose record is the NIC's only copy, was deleted: %v", err)
			}
		})
	})
}
