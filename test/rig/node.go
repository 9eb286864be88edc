package rig

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/kovn/kovn/pkg/annotation"
	"github.com/kovn/kovn/pkg/bgp"
)

// Paths containerd, kubelet, libcni and cAdvisor hard-code: each node gets its own view of them
// by bind mounts in its private mount namespace (see ../shared/anchors/node-netns.md).
// imageImportTimeout bounds one image import on a node (ctr images import); the whole bring-up
// stays bounded by Config.ReadyTimeout.
const imageImportTimeout = 5 * time.Minute

var nodeBindPaths = map[string]string{
	"run-containerd":     "/run/containerd",
	"var-lib-containerd": "/var/lib/containerd",
	"opt-containerd":     "/opt/containerd",
	"var-lib-kubelet":    "/var/lib/kubelet",
	"log-pods":           "/var/log/pods",
	"log-containers":     "/var/log/containers",
	"var-lib-cni":        "/var/lib/cni",
	"cni-netd":           "/etc/cni/net.d",
}

// Host-global sysctls kubelet writes; shadowed per node so the host keeps its values.
var kubeletSysctls = map[string]string{
	"vm/overcommit_memory": "1", "vm/panic_on_oom": "0", "kernel/panic": "10", "kernel/panic_on_oops": "1",
	"kernel/keys/root_maxkeys": "1000000", "kernel/keys/root_maxbytes": "25000000",
}

const containerdTOML = `version = 2
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "%s"
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true
  [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
    runtime_type = "io.containerd.runc.v2"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
      SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "%s"
    conf_dir = "/etc/cni/net.d"
`

const kubeletYAML = `apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
cgroupDriver: cgroupfs
cgroupRoot: /%s
address: "%s"
readOnlyPort: 0
healthzPort: 0
failSwapOn: false
makeIPTablesUtilChains: false
oomScoreAdj: 0
clusterDNS: ["%s"]
clusterDomain: cluster.local
resolvConf: %s
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard: {memory.available: "0%%", nodefs.available: "0%%", nodefs.inodesFree: "0%%", imagefs.available: "0%%", imagefs.inodesFree: "0%%"}
authentication: {anonymous: {enabled: true}, webhook: {enabled: false}}
authorization: {mode: AlwaysAllow}
serializeImagePulls: false
`

// kubeletSync shortens the kubelets' pod sync (which also refreshes Secret and ConfigMap
// volumes) where a lab rotates the chart's CAs in steps of ChartCARotationStep.
func (c Config) kubeletSync() string {
	if !c.Chart() || c.ChartCARotationStep == 0 {
		return ""
	}
	return "syncFrequency: 5s\n"
}

// nodeSpec is node n of cluster cl: OVS (ovsdb-server, userspace vswitchd with br-phy holding the
// node address, so geneve tunnels egress through OVS), ovn-controller, containerd and kubelet.
func (c Config) nodeSpec(cl, n int, pki clusterPKI, images []string) (SupervisorSpec, error) {
	name, dir := NodeName(cl, n), c.NodeDir(cl, n)
	logs := filepath.Join(dir, "logs")
	run := filepath.Join(c.runDir(), name)
	ovsRun, ovnRun := filepath.Join(run, "ovs"), filepath.Join(run, "ovn")
	for _, d := range []string{logs, ovsRun, ovnRun, c.cniBinDir()} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return SupervisorSpec{}, err
		}
	}
	confDB := filepath.Join(dir, "ovs", "conf.db")
	if err := createDB(confDB, filepath.Join(ovsSchemaDir, "vswitch.ovsschema")); err != nil {
		return SupervisorSpec{}, err
	}
	dns := c.clusterDNSIP(cl)
	files := map[string]string{
		"containerd.toml": fmt.Sprintf(containerdTOML, PauseImage, c.cniBinDir()),
		"kubelet.yaml":    fmt.Sprintf(kubeletYAML, c.CgroupRoot(cl, n), c.anyAddr(), dns, filepath.Join(dir, "resolv.conf")) + c.kubeletSync(),
		"resolv.conf":     "nameserver " + dns + "\nsearch default.svc.cluster.local svc.cluster.local cluster.local\noptions ndots:5\n",
	}
	for f, content := range files {
		if err := os.WriteFile(filepath.Join(dir, f), []byte(content), 0o644); err != nil {
			return SupervisorSpec{}, err
		}
	}
	kubeconfig := filepath.Join(dir, "kubelet.kubeconfig")
	if err := pki.writeKubeconfig(kubeconfig, ClusterName(cl), "https://"+hostPort(c.ControlPlaneIPs(cl)[0], PortAPIServer),
		"system:node:"+name, pki.NodeTokens[name]); err != nil {
		return SupervisorSpec{}, err
	}
	if c.BridgeNode(n) {
		if err := c.writeBridgeConf(cl, n); err != nil {
			return SupervisorSpec{}, err
		}
	}
	spec := SupervisorSpec{Name: name, Dir: dir, Hostname: name, CgroupRoots: []string{c.CgroupRoot(cl, n)}, Sysctls: kubeletSysctls}
	for src, dst := range nodeBindPaths {
		spec.Binds = append(spec.Binds, Bind{Src: filepath.Join(dir, src), Dst: dst})
	}
	spec.Binds = append(spec.Binds, Bind{Src: filepath.Join(dir, "resolv.conf"), Dst: "/etc/resolv.conf", File: true})
	if c.Chart() {
		binds, err := c.chartNodeBinds(cl, n)
		if err != nil {
			return SupervisorSpec{}, err
		}
		spec.Binds = append(spec.Binds, binds...)
	}
	spec.Steps = c.nodeSteps(cl, n, confDB, ovsRun, ovnRun, logs, kubeconfig, images)
	return spec, nil
}

func (c Config) nodeSteps(cl, n int, confDB, ovsRun, ovnRun, logs, kubeconfig string, images []string) []Step {
	name, ips := NodeName(cl, n), c.NodeIPs(cl, n)
	sbRemote := c.ovsdbScheme() + ":" + hostPort(c.ControlPlaneIPs(cl)[0], PortSB)
	h := ovsHost{name: name, ips: ips, sbRemote: sbRemote, tls: c.ChassisTLS(cl, n), routes: c.outsideRouteCmds(),
		confDB: confDB, ovsRun: ovsRun, ovnRun: ovnRun, logs: logs}
	dbSock, daemon := h.dbSock(), h.daemon
	steps := h.steps()
	if c.Chart() {
		// OVS and ovn-controller are the chart's pods; the node only moves its address onto
		// br-phy once they run.
		steps = []Step{c.uplinkKeeperStep(cl, n, logs)}
	}
	steps = append(steps, daemon("containerd", Ready{Unix: "/run/containerd/containerd.sock"}, "containerd", "--config",
		filepath.Join(c.NodeDir(cl, n), "containerd.toml")))
	for i, img := range images {
		// An import unpacks the archive's layers onto the node's disk: kovn's image alone is
		// 365 MB unpacked, and two multi-cluster chart labs coming up together import it on 8
		// nodes at once, which outlasted the 1 min default on a 2-core machine (CI, twice).
		steps = append(steps, Step{Name: fmt.Sprintf("import-image-%d", i), Log: filepath.Join(logs, "images.log"),
			Timeout: imageImportTimeout,
			Argv:    []string{"ctr", "-n", "k8s.io", "images", "import", "--snapshotter", "overlayfs", img}})
	}
	// Like a node's service manager, the rig starts kubelet again when it exits; a test holds it
	// down (StopDaemon) to keep a chart pod's dead container from being restarted.
	kubelet := daemon("kubelet", Ready{TCP: hostPort(ips[0], 10250)}, slices.Concat([]string{c.k8sBin("kubelet"),
		"--config=" + filepath.Join(c.NodeDir(cl, n), "kubelet.yaml"), "--kubeconfig=" + kubeconfig,
		"--hostname-override=" + name, "--node-ip=" + annotation.JoinAddrs(ips), "--v=2"})...)
	kubelet.Restart = true
	steps = append(steps, kubelet)
	if c.Kovn && !c.Chart() && !c.BridgeNode(n) {
		kovnKubeconfig := c.DaemonKubeconfig(cl, n)
		steps = append(steps, c.credentialsStep("kovn-daemon-credentials", logs, Credentials{
			AdminKubeconfig: filepath.Join(c.ClusterDir(cl), "admin-internal.kubeconfig"),
			ServiceAccount:  DaemonServiceAccount, Node: name, Out: kovnKubeconfig}))
		d := daemon("kovn-daemon", Ready{}, filepath.Join(c.KovnBinDir, "kovn-daemon"),
			"--kubeconfig="+kovnKubeconfig, "--node-name="+name,
			"--ovs-db=unix:"+dbSock, "--ovs-vswitchd-ctl="+filepath.Join(ovsRun, "ovs-vswitchd.ctl"),
			"--cni-socket="+filepath.Join(filepath.Dir(ovsRun), "cni.sock"),
			"--cni-bin-dir="+c.cniBinDir(), "--state-dir="+filepath.Join(filepath.Dir(ovsRun), "daemon"),
			"--cni-conf-dir=/etc/cni/net.d", "--mtu=1400", "--netdev",
			"--ovn-remote="+sbRemote, "--service-cidrs="+annotation.JoinAddrs(c.ServiceCIDRs(cl)),
			"--external-ip-cidrs="+annotation.JoinAddrs(ExternalIPCIDRs()), "--attachment-host-interfaces="+UnderlayNIC,
			// Metrics on the node's loopback, plain: the lab's tests read them from the node.
			// The chart serves them over TLS to reviewed tokens (metricsauth).
			"--metrics-bind-address=127.0.0.1:9474", "--metrics-secure=false")
		d.Restart = true
		speakerKubeconfig := c.SpeakerKubeconfig(cl, n)
		steps = append(steps, d, c.credentialsStep("kovn-speaker-credentials", logs, Credentials{
			AdminKubeconfig: filepath.Join(c.ClusterDir(cl), "admin-internal.kubeconfig"),
			ServiceAccount:  SpeakerServiceAccount, Node: name, Out: speakerKubeconfig}))
		// Every node speaks BGP in the rig; with no BgpPeer a speaker holds no session. Its
		// state dir (the graceful-restart marker) outlives the process, as /run/kovn does.
		sp := daemon("kovn-speaker", Ready{}, filepath.Join(c.KovnBinDir, "kovn-speaker"),
			"--kubeconfig="+speakerKubeconfig, "--node-name="+name, "--secrets-namespace="+bgp.SecretsNamespace,
			"--state-dir="+filepath.Join(filepath.Dir(ovsRun), "speaker"),
			"--external-ip-cidrs="+SpeakerExternalIPCIDR.String(), "--metrics-bind-address=127.0.0.1:9472", "--metrics-secure=false")
		sp.Restart = true
		steps = append(steps, sp)
	}
	return steps
}

func (c Config) cniBinDir() string { return filepath.Join(c.Dir, "cni-bin") }
