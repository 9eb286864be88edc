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
	// ReadyTimeout bounds the whole bring-up.
	ReadyTimeout time.Duration
	// Kovn installs kovn: kovn-controller beside each control plane, kovn-daemon on each node
	// (restarted if it exits, like a Deployment/DaemonSet), kovn-cni as the nodes' CNI plugin.
	Kovn bool
	// FakeNodes registers this many Node objects per cluster that have no kubelet, OVS or
	// containerd behind them (scale tests): kovn gives them join ports like any node, and pods
	// bound to them get addresses and switch ports but never run. See fakenodes.go.
	FakeNodes int
	// BridgeNodes makes the last BridgeNodes real nodes of each cluster use the plain
	// containernetworking bridge + host-local CNI instead of kovn-cni (no kovn-daemon there),
	// so a benchmark can compare both on one rig.
	BridgeNodes int
}

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
		c.ReadyTimeout = 3 * time.Minute
	}
	return c, nil
}

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
)

// BridgeNode reports whether real node n of a cluster runs the bridge CNI instead of kovn.
func (c Config) BridgeNode(n int) bool { return n > c.Nodes-c.BridgeNodes }

// ClusterDir is where cluster cl keeps its control-plane files; NodeDir a node's.
func (c Config) ClusterDir(cl int) string { return filepath.Join(c.Dir, ClusterName(cl)) }
func (c Config) NodeDir(cl, n int) string {
	return filepath.Join(c.ClusterDir(cl), "nodes", NodeName(cl, n))
}
