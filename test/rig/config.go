// Package rig brings up real multi-cluster kovn labs on one Linux host: every cluster's control
// plane, every node and the fabric between them are network namespaces running real processes
// (etcd, kube-apiserver, OVN, OVS, containerd, kubelet). kovn-rig and the e2e tests both drive it.
//
// Hygiene: the rig adds nothing to the host's own network. Its links, bridges and addresses live
// in namespaces it created; the host gets only loopback listeners (the forwarder) and the rig's
// own cgroup directories, all removed by Down.
package rig

import (
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Config describes the rig to bring up. Zero values take the defaults in Defaults.
type Config struct {
	Dir      string // state directory: logs, certs, DBs, state.json
	Clusters int
	Nodes    int // per cluster
	// K8sBinDir holds kube-apiserver, kube-controller-manager, kube-scheduler, kubelet, kubectl.
	K8sBinDir string
	// KovnBinDir holds kovn-rig (the supervisor runs as `kovn-rig supervise`) and the pod image binaries.
	KovnBinDir string
	// Prefix is put in front of every netns name so several rigs can share a host.
	Prefix string
	// ReadyTimeout bounds the whole bring-up (DefaultReadyTimeout when zero).
	ReadyTimeout time.Duration
	// Kovn installs kovn: kovn-controller beside each control plane, kovn-daemon on each node
	// (restarted if it exits, like a Deployment/DaemonSet), kovn-cni as the nodes' CNI plugin.
	Kovn bool
	// Install is how kovn runs: InstallProcesses (default) or InstallChart (see chart.go).
	Install string
	// Pinger runs the chart's kovn-pinger DaemonSet (InstallChart only): a pod per node on
	// kovn's network. Suites that count pods or addresses leave it off.
	Pinger bool
	// CentralNodes runs the chart's OVN central (NB, SB and northd: 3-member raft clusters
	// with 3) on nodes 1..CentralNodes of each cluster (InstallChart only); 0 means 1.
	CentralNodes int
	// FakeNodes registers this many Node objects per cluster that have no kubelet, OVS or
	// containerd behind them (scale tests): kovn gives them join ports like any node, and pods
	// bound to them get addresses and switch ports but never run. See fakenodes.go.
	FakeNodes int
	// BridgeNodes makes the last BridgeNodes real nodes of each cluster use the plain
	// containernetworking bridge + host-local CNI instead of kovn-cni (no kovn-daemon there),
	// so a benchmark can compare both on one rig.
	BridgeNodes int
	// IPFamily is the rig's address family: "ipv4", "ipv6" or "dual" (both, IPv4 primary).
	// Fabric, nodes, control planes, the external host, service and pod CIDRs and kubelet node
	// IPs all follow it.
	IPFamily string
	// ICRaft serves IC-NB and IC-SB as 3-member raft clusters (ICRaftMembers ovsdb-servers
	// each, in the IC namespace on their own ports), so a leader's loss can be tested; the
	// endpoints then name every member. Standalone by default.
	ICRaft bool
	// ForeignAZ adds an OVN availability zone kovn does not manage (the OpenStack/Neutron case,
	// foreignaz.go) joined to the rig's IC databases, which a 1-cluster rig then has too.
	ForeignAZ bool
	// InsecurePlainTCP serves the OVN databases on plain TCP, every client unauthenticated
	// (kovn's insecure option, for comparisons such as the TLS cost benchmark). By default
	// every network connection to them is mutual TLS (ovntls.go).
	InsecurePlainTCP bool
	// ControllerNBOverNetwork has kovn-controller reach NB over the network at the control
	// plane's address, as the chart's does (ssl: with the NB admin identity; tcp: with
	// InsecurePlainTCP), instead of the unix socket; SB stays on its socket (the SB listener
	// takes chassis certificates only). The TLS cost benchmark runs one rig each way.
	ControllerNBOverNetwork bool
	// ChartICDatabases has cluster 1's chart serve a clusterset's IC-NB and IC-SB (with
	// OVN_ClusterSet) itself (interconnect.databases, InstallChart only), on mutual TLS with a
	// certificate from the rig's clusterset CA (ChartICDBTLS) unless InsecurePlainTCP. No
	// cluster joins them: the suites check who they answer.
	ChartICDatabases bool
	// ChartCARotationStep, with InstallChart, is kovn-controller's --ovn-ca-rotation-step; each
	// kovn-daemon then reads the CA ConfigMap every fifth of it and the kubelets sync their pods
	// every 5 s, so a Secret volume and a node's trust follow within a step.
	ChartCARotationStep time.Duration
	// MirrorNamespaces are the namespaces whose pods' ovn.kovn.io/mirror annotation each
	// kovn-daemon honours (--mirror-namespaces); none by default.
	MirrorNamespaces []string
	// ExtraImages are docker-archive tarballs imported into every node after the lab's own pod
	// images (Kubernetes' e2e suite's images, make images' upstream-e2e.tar).
	ExtraImages []string
}

// Interconnected says whether the rig has the OVN-IC databases (and an ovn-ic beside each
// cluster's OVN): with two clusters or more, or a foreign AZ to join.
func (c Config) Interconnected() bool { return c.Clusters > 1 || c.ForeignAZ }

// ICRaftMembers is the size of the IC databases' raft clusters with Config.ICRaft.
const ICRaftMembers = 3

// IP families of a rig.
const (
	IPv4 = "ipv4"
	IPv6 = "ipv6"
	Dual = "dual"
)

// K8sVersion is the pinned Kubernetes version (hack/install-deps.sh builds it).
const K8sVersion = "v1.31.4"

// DefaultK8sBinDir is where hack/install-deps.sh caches the Kubernetes binaries.
func DefaultK8sBinDir() string {
	if d := os.Getenv("KOVN_K8S_BIN_DIR"); d != "" {
		return d
	}
	home, _ := os.UserHomeDir()
	return filepath.Join(home, ".cache", "kovn", "k8s-"+K8sVersion)
}

// Defaults fills unset fields.
func (c Config) Defaults() (Config, error) {
	if c.Dir == "" {
		c.Dir = "_output/rig"
	}
	abs, err := filepath.Abs(c.Dir)
	if err != nil {
		return c, err
	}
	c.Dir = abs
	if c.Clusters == 0 {
		c.Clusters = 1
	}
	if c.Nodes == 0 {
		c.Nodes = 2
	}
	if c.Clusters < 1 || c.Clusters > 9 || c.Nodes < 1 || c.Nodes > 50 {
		return c, fmt.Errorf("rig size %d clusters x %d nodes out of range (1-9 clusters, 1-50 nodes)", c.Clusters, c.Nodes)
	}
	if c.FakeNodes < 0 || c.FakeNodes > MaxFakeNodes || c.BridgeNodes < 0 || c.BridgeNodes > c.Nodes {
		return c, fmt.Errorf("fake nodes %d (0-%d) or bridge nodes %d (0-%d) out of range", c.FakeNodes, MaxFakeNodes, c.BridgeNodes, c.Nodes)
	}
	switch c.IPFamily {
	case "":
		c.IPFamily = Dual
	case IPv4, IPv6, Dual:
	default:
		return c, fmt.Errorf("ip family %q: want ipv4, ipv6 or dual", c.IPFamily)
	}
	switch c.Install {
	case "":
		c.Install = InstallProcesses
	case InstallProcesses, InstallChart:
	default:
		return c, fmt.Errorf("install %q: want %s or %s", c.Install, InstallProcesses, InstallChart)
	}
	if c.Install == InstallChart && (c.BridgeNodes > 0 || c.FakeNodes > 0) {
		return c, fmt.Errorf("--install chart does not combine with bridge or fake nodes")
	}
	if c.K8sBinDir == "" {
		c.K8sBinDir = DefaultK8sBinDir()
	}
	if c.KovnBinDir == "" {
		exe, err := os.Executable()
		if err != nil {
			return c, err
		}
		c.KovnBinDir = filepath.Dir(exe)
	}
	if c.Prefix == "" {
		c.Prefix = PrefixFor(c.Dir)
	}
	if c.ReadyTimeout == 0 {
		c.ReadyTimeout = DefaultReadyTimeout
	}
	return c, nil
}

// DefaultReadyTimeout is a bound, not a wait: a multi-cluster chart lab on a 2-core machine
// busy with another lab took 3.6 min to come up (two such labs importing kovn's image on 8 nodes
// at once, then helm --wait), past the 3 min this once was.
const DefaultReadyTimeout = 9 * time.Minute

// PrefixFor derives a short, stable per-rig prefix from the state directory, so two rigs with
// different state dirs never share a namespace name.
func PrefixFor(dir string) string {
	sum := sha1.Sum([]byte(dir))
	return "kr" + hex.EncodeToString(sum[:])[:4]
}

// Address plan. The fabric is one L2 segment, 172.30.0.0/16, private to the rig's namespaces.
// Cluster c's control plane is 172.30.c.1, its node n is 172.30.c.(10+n); the IC databases sit
// at 172.30.0.2. Pod and service CIDRs differ per cluster so clusters can later be joined.
var fabricPrefix = netip.MustParsePrefix("172.30.0.0/16")

// FabricBits is the prefix length of the fabric segment.
const FabricBits = 16

// ControlPlaneIP is cluster c's control-plane address on the fabric.
func ControlPlaneIP(c int) netip.Addr { return netip.AddrFrom4([4]byte{172, 30, byte(c), 1}) }

// NodeIP is node n (1-based) of cluster c on the fabric.
func NodeIP(c, n int) netip.Addr { return netip.AddrFrom4([4]byte{172, 30, byte(c), byte(10 + n)}) }

// ICDBIP is the address of the interconnect databases.
func ICDBIP() netip.Addr { return netip.AddrFrom4([4]byte{172, 30, 0, 2}) }

// ExternalHostIP is a host outside every cluster, on the fabric: the target of egress tests.
func ExternalHostIP() netip.Addr { return netip.AddrFrom4([4]byte{172, 30, 0, 100}) }

// ServiceCIDR is cluster c's service range; its first address is the apiserver's ClusterIP.
func ServiceCIDR(c int) netip.Prefix {
	return netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(95 + c), 0, 0}), 16)
}

// PodCIDR is cluster c's default pod subnet (10.16.0.0/16 for cluster 1).
func PodCIDR(c int) netip.Prefix {
	return netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(15 + c), 0, 0}), 16)
}

// JoinCIDR is the join subnet of every cluster (node ovn0 addresses; never leaves a cluster).
var JoinCIDR = netip.MustParsePrefix("100.64.0.0/16")

// ClusterName is cluster c's name ("c1"); NodeName its node n ("c1-n1"). Node names are unique
// across the rig because OVN chassis names must be unique across availability zones.
func ClusterName(c int) string    { return fmt.Sprintf("c%d", c) }
func NodeName(c, n int) string    { return fmt.Sprintf("c%d-n%d", c, n) }
func (c Config) FabricNS() string { return c.Prefix + "-fab" }
func (c Config) ICNS() string     { return c.Prefix + "-ic" }
func (c Config) ExtNS() string    { return c.Prefix + "-ext" }

// ControlPlaneNS is cluster cl's control-plane namespace.
func (c Config) ControlPlaneNS(cl int) string { return fmt.Sprintf("%s-c%d", c.Prefix, cl) }

// NodeNS is the namespace of node n of cluster cl.
func (c Config) NodeNS(cl, n int) string { return fmt.Sprintf("%s-c%dn%d", c.Prefix, cl, n) }

// CgroupRoot is the kubelet cgroupRoot of a node, unique per rig.
func (c Config) CgroupRoot(cl, n int) string { return fmt.Sprintf("kovn-%s-c%dn%d", c.Prefix, cl, n) }

// Well-known ports inside the rig's namespaces (never bound on the host).
const (
	PortEtcd      = 2379
	PortEtcdPeer  = 2380
	PortAPIServer = 6443
	PortNB        = 6641
	PortSB        = 6642
	PortICNB      = 6645
	PortICSB      = 6646
	// PortControllerMetrics: kovn-controller's Prometheus metrics, on the control plane's
	// loopback only (benchmarks read kovn_nb_transactions_total through `ip netns exec`).
	PortControllerMetrics = 10300
	// PortControllerHealth: its /livez and /readyz, on the same loopback.
	PortControllerHealth = 10301
	// PortICMonitor: with ICRaft, the metrics of kovn-ovn-monitor reading IC member m's two
	// servers, on PortICMonitor+2m (its probes on +2m+1), on the IC namespace's loopback.
	PortICMonitor = 10310
)

// BridgeNode reports whether real node n of a cluster runs the bridge CNI instead of kovn.
func (c Config) BridgeNode(n int) bool { return n > c.Nodes-c.BridgeNodes }

// ClusterDir is where cluster cl keeps its control-plane files; NodeDir a node's.
func (c Config) ClusterDir(cl int) string { return filepath.Join(c.Dir, ClusterName(cl)) }
func (c Config) NodeDir(cl, n int) string {
	return filepath.Join(c.ClusterDir(cl), "nodes", NodeName(cl, n))
}

// IPv6 address plan, mirroring the IPv4 one so an address reads the same in both families:
// the fabric is fd00:30::/64, cluster c's control plane fd00:30::c:1, its node n
// fd00:30::c:(10+n), the IC databases fd00:30::2 and the external host fd00:30::100. Decimal
// digits of the IPv4 plan are written as hex groups ("1:11" for 172.30.1.11).
var fabricPrefix6 = netip.MustParsePrefix("fd00:30::/64")

// FabricBits6 is the prefix length of the fabric segment in IPv6.
const FabricBits6 = 64

// hexGroup reads the decimal digits of n as a hex group: 11 -> 0x11.
func hexGroup(n int) uint16 {
	var g uint16
	for _, d := range fmt.Sprint(n) {
		g = g<<4 | uint16(d-'0')
	}
	return g
}

// v6 builds an address from a /48-or-shorter base plus its last two groups.
func v6(base netip.Prefix, g6, g7 uint16) netip.Addr {
	b := base.Addr().As16()
	b[12], b[13], b[14], b[15] = byte(g6>>8), byte(g6), byte(g7>>8), byte(g7)
	return netip.AddrFrom16(b)
}

func ControlPlaneIP6(c int) netip.Addr { return v6(fabricPrefix6, hexGroup(c), 1) }
func NodeIP6(c, n int) netip.Addr      { return v6(fabricPrefix6, hexGroup(c), hexGroup(10+n)) }
func ICDBIP6() netip.Addr              { return v6(fabricPrefix6, 0, 2) }
func ExternalHostIP6() netip.Addr      { return v6(fabricPrefix6, 0, 0x100) }

// ServiceCIDR6 is cluster c's IPv6 service range (fd00:10:96::/112 for cluster 1: the
// apiserver refuses IPv6 service ranges wider than /108).
func ServiceCIDR6(c int) netip.Prefix { return fd0010(hexGroup(95+c), 112) }

// PodCIDR6 is cluster c's IPv6 default pod subnet (fd00:10:16::/64 for cluster 1).
func PodCIDR6(c int) netip.Prefix { return fd0010(hexGroup(15+c), 64) }

// fd0010 is fd00:10:g::/bits, the IPv6 twin of the IPv4 plan's 10.g.0.0.
func fd0010(g uint16, bits int) netip.Prefix {
	b := [16]byte{0xfd, 0, 0, 0x10, byte(g >> 8), byte(g)}
	return netip.PrefixFrom(netip.AddrFrom16(b), bits)
}

// JoinCIDR6 is the IPv6 join subnet of every cluster. A /112 (as Kube-OVN's default): OVN
// 23.03's ic-route-blacklist denies every IPv6 route at least as long as an IPv6 entry, so
// the join subnet's entry must be longer than the pod subnets (/64) to keep only itself out.
var JoinCIDR6 = netip.MustParsePrefix("fd00:100:64::/112")

// HasIPv4 and HasIPv6 say which families the rig carries.
func (c Config) HasIPv4() bool { return c.IPFamily != IPv6 }
func (c Config) HasIPv6() bool { return c.IPFamily == IPv6 || c.IPFamily == Dual }

// pick returns the rig's addresses of a thing in family order, primary (IPv4 in dual) first.
func pick[T any](c Config, v4, v6 T) []T {
	var out []T
	if c.HasIPv4() {
		out = append(out, v4)
	}
	if c.HasIPv6() {
		out = append(out, v6)
	}
	return out
}

// Family-ordered addresses and CIDRs of the rig; the first is the primary.
func (c Config) ControlPlaneIPs(cl int) []netip.Addr {
	return pick(c, ControlPlaneIP(cl), ControlPlaneIP6(cl))
}
func (c Config) NodeIPs(cl, n int) []netip.Addr { return pick(c, NodeIP(cl, n), NodeIP6(cl, n)) }
func (c Config) ICDBIPs() []netip.Addr          { return pick(c, ICDBIP(), ICDBIP6()) }

// ICNBEndpoints and ICSBEndpoints are the interconnect databases' members in OVSDB syntax,
// as an InterConnect lists them; ICNBEndpoint and ICSBEndpoint join them with commas, as
// ovn-ic and the ovn-ic-*ctl tools take them.
func (c Config) ICNBEndpoints() []string { return c.icEndpoints(PortICNB) }
func (c Config) ICSBEndpoints() []string { return c.icEndpoints(PortICSB) }
func (c Config) ICNBEndpoint() string    { return strings.Join(c.ICNBEndpoints(), ",") }
func (c Config) ICSBEndpoint() string    { return strings.Join(c.ICSBEndpoints(), ",") }

// ICNBLocal and ICSBLocal are the IC databases' members' unix sockets, comma-separated, for
// ovn-ic-nbctl --db / ovn-ic-sbctl --db on the host (no certificate needed).
func (c Config) ICNBLocal() string { return c.icSockets("icnb") }
func (c Config) ICSBLocal() string { return c.icSockets("icsb") }

func (c Config) icSockets(db string) string {
	var socks []string
	for m := 0; m < c.ICDBMembers(); m++ {
		socks = append(socks, "unix:"+filepath.Join(c.runDir(), "ic", ICDBMemberName(db, m)+".sock"))
	}
	return strings.Join(socks, ",")
}

// ICDBMembers is how many ovsdb-servers serve each IC database.
func (c Config) ICDBMembers() int {
	if c.ICRaft {
		return ICRaftMembers
	}
	return 1
}

// icMemberPort is the client port of member m (0-based) of the IC database whose first
// member listens on base; raft members talk to each other on icMemberPort(...)+2 (+3 for the
// IC-SB server's OVN_ClusterSet).
func icMemberPort(base, m int) int { return base + 10*m }

func (c Config) icEndpoints(base int) []string {
	var eps []string
	for m := 0; m < c.ICDBMembers(); m++ {
		eps = append(eps, c.ovsdbScheme()+":"+hostPort(c.ICDBIPs()[0], icMemberPort(base, m)))
	}
	return eps
}

func (c Config) ExternalHostIPs() []netip.Addr { return pick(c, ExternalHostIP(), ExternalHostIP6()) }
func (c Config) ServiceCIDRs(cl int) []netip.Prefix {
	return pick(c, ServiceCIDR(cl), ServiceCIDR6(cl))
}
func (c Config) PodCIDRs(cl int) []netip.Prefix { return pick(c, PodCIDR(cl), PodCIDR6(cl)) }
func (c Config) JoinCIDRs() []netip.Prefix      { return pick(c, JoinCIDR, JoinCIDR6) }

// FabricAddrs are the CIDR-notation fabric addresses for the given family-ordered IPs.
func FabricAddrs(ips []netip.Addr) []string {
	var out []string
	for _, ip := range ips {
		bits := FabricBits
		if ip.Is6() {
			bits = FabricBits6
		}
		out = append(out, netip.PrefixFrom(ip, bits).String())
	}
	return out
}

// hostPort is addr:port with IPv6 brackets.
func hostPort(a netip.Addr, port int) string { return netip.AddrPortFrom(a, uint16(port)).String() }

// anyAddr is the wildcard listen address covering the rig's families.
func (c Config) anyAddr() string {
	if c.HasIPv6() {
		return "::"
	}
	return "0.0.0.0"
}

// Centrals is how many nodes of each cluster run the chart's OVN central.
func (c Config) Centrals() int { return max(1, min(c.CentralNodes, c.Nodes)) }
