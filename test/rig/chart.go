package rig

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"golang.org/x/sync/errgroup"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kovn/kovn/deploy"
	"github.com/kovn/kovn/pkg/annotation"
	"github.com/kovn/kovn/pkg/interconnect/ictls"
)

// How kovn runs in a rig (Config.Install).
const (
	// InstallProcesses: the rig runs OVS, ovn-controller, OVN central and kovn's components as
	// supervised processes, with the identities and RBAC rendered from the chart.
	InstallProcesses = "processes"
	// InstallChart: `helm install` of deploy/ onto the rig's kubelets: OVN central, OVS,
	// ovn-controller and kovn's components run as the chart's pods (hostNetwork, hostPath into
	// each node's own directories), from the image `make images` builds.
	InstallChart = "chart"
)

// ChartRelease is the Helm release name the rig installs.
const ChartRelease = "kovn"

// Chart reports whether kovn is installed from the chart.
func (c Config) Chart() bool { return c.Kovn && c.Install == InstallChart }

// nodeHostDir is where a chart-installed node's hostPath volumes live: the same path on every
// node (a DaemonSet has one pod template), bound in each node's mount namespace over its own
// directory, so no node shares OVS, OVN or kovn state with another and nothing lands on the
// host's /etc, /run or /var. Under runDir: unix socket paths are limited to 108 bytes.
func (c Config) nodeHostDir() string { return filepath.Join(c.runDir(), "node-host") }

// NodeHostPath is a chart hostPath of a node (as the node's processes see it) for one of the
// chart's directories: ovs-run, ovn-run, ovs-db, ovs-log, kovn-run, ovn-central.
func (c Config) NodeHostPath(dir string) string { return filepath.Join(c.nodeHostDir(), dir) }

// nodeHostDirs are the chart's per-node directories.
var nodeHostDirs = []string{"ovs-run", "ovn-run", "ovs-db", "ovs-log", "kovn-run", "ovn-central"}

// chartNodeBinds binds node (cl, n)'s own directories over nodeHostDir.
func (c Config) chartNodeBinds(cl, n int) ([]Bind, error) {
	if err := os.MkdirAll(c.nodeHostDir(), 0o755); err != nil {
		return nil, err
	}
	src := filepath.Join(c.NodeDir(cl, n), "host")
	for _, d := range nodeHostDirs {
		if err := os.MkdirAll(filepath.Join(src, d), 0o755); err != nil {
			return nil, err
		}
	}
	return []Bind{{Src: src, Dst: c.nodeHostDir()}}, nil
}

// chartOVNSocket is, on the host, the unix socket of database db (ovnnb_db, ovnsb_db) that
// the chart's OVN central serves on node 1 of cluster cl.
func (c Config) chartOVNSocket(cl int, db string) string {
	return filepath.Join(c.NodeDir(cl, 1), "host", "ovn-run", db+".sock")
}

// ChartImage is the kovn image archive the chart's pods run (`make images`).
func (c Config) ChartImage() string {
	return filepath.Join(filepath.Dir(c.KovnBinDir), "images", "kovn.tar")
}

// ChartValues are the values the rig installs cluster cl with.
func (c Config) ChartValues(cl int) []string {
	v := []string{
		"image.pullPolicy=Never",
		"ovnCentral.addresses={" + strings.Join(c.centralAddresses(cl), ",") + "}",
		"ovnCentral.dataDir=" + c.NodeHostPath("ovn-central"),
		fmt.Sprintf("ovnCentral.insecurePlainTCP=%t", c.InsecurePlainTCP),
		"cluster.podCIDR=" + strings.ReplaceAll(annotation.JoinAddrs(c.PodCIDRs(cl)), ",", "\\,"),
		"cluster.joinCIDR=" + strings.ReplaceAll(annotation.JoinAddrs(c.JoinCIDRs()), ",", "\\,"),
		"cluster.serviceCIDR=" + strings.ReplaceAll(annotation.JoinAddrs(c.ServiceCIDRs(cl)), ",", "\\,"),
		"cluster.mtu=1400",
		"apiServer.host=" + c.ControlPlaneIPs(cl)[0].String(),
		fmt.Sprintf("apiServer.port=%d", PortAPIServer),
		"ovs.datapath=netdev",
		"ovs.runDir=" + c.NodeHostPath("ovs-run"),
		"ovs.ovnRunDir=" + c.NodeHostPath("ovn-run"),
		"ovs.dbDir=" + c.NodeHostPath("ovs-db"),
		"ovs.logDir=" + c.NodeHostPath("ovs-log"),
		"daemon.runDir=" + c.NodeHostPath("kovn-run"),
		"daemon.cniBinDir=" + c.cniBinDir(),
		fmt.Sprintf("controller.replicas=%d", min(2, c.Nodes)),
		"speaker.enabled=true",
		"speaker.externalIPCIDRs=" + SpeakerExternalIPCIDR.String(),
		"cluster.externalIPCIDRs=" + strings.ReplaceAll(annotation.JoinAddrs(ExternalIPCIDRs()), ",", `\,`),
		"attachmentHostInterfaces=" + UnderlayNIC,
		fmt.Sprintf("pinger.enabled=%t", c.Pinger),
		// A stopped ovn-controller falls behind NB within seconds (the default is 30 s).
		"ovnCentral.monitor.nbCfgProbeInterval=5s",
		// The pinger checks the lab's external host too.
		"pinger.externalAddresses={" + strings.Join(addrStrings(c.ExternalHostIPs()), ",") + "}",
	}
	if len(c.MirrorNamespaces) > 0 {
		v = append(v, "mirror.namespaces="+strings.Join(c.MirrorNamespaces, `\,`))
	}
	if c.ChartCARotationStep > 0 {
		v = append(v, "controller.extraArgs={--ovn-ca-rotation-step="+c.ChartCARotationStep.String()+"}",
			"daemon.extraArgs={--ovn-chassis-recheck="+(c.ChartCARotationStep/5).String()+"}")
	}
	if c.ChartICDatabases && cl == 1 {
		v = append(v, "interconnect.databases.enabled=true", fmt.Sprintf("interconnect.insecurePlainTCP=%t", c.InsecurePlainTCP))
	}
	if c.Interconnected() {
		// Each cluster an AZ of the rig's clusterset (IC-NB and IC-SB are the rig's), its
		// node 1 the gateway: the InterConnect the multi-cluster suites apply themselves.
		v = append(v, "interconnect.enabled=true", fmt.Sprintf("interconnect.azName=az%d", cl),
			"interconnect.icNorthbound={"+strings.Join(c.ICNBEndpoints(), ",")+"}",
			"interconnect.icSouthbound={"+strings.Join(c.ICSBEndpoints(), ",")+"}",
			"interconnect.gatewayNodes={"+NodeName(cl, 1)+"}", fmt.Sprintf("interconnect.insecurePlainTCP=%t", c.InsecurePlainTCP))
	}
	return v
}

// HelmArgs are helm's global flags for cluster cl (its kubeconfig on the host).
func (r *Rig) HelmArgs(cl int) []string {
	return []string{"--kubeconfig", r.State.Clusters[cl-1].Kubeconfig, "--namespace", "kube-system"}
}

// InstallChart runs `helm upgrade --install` of the embedded chart on cluster cl and waits
// until every Deployment and DaemonSet of it is ready.
func (r *Rig) InstallChart(ctx context.Context, cl int) error {
	cfg := r.State.Config
	if err := r.labelChartNodes(ctx, cl); err != nil {
		return err
	}
	// The Secrets an installer gives the chart: the AZ's clusterset certificate (which the
	// chart's ovn-ic mounts and kovn-controller reads) and the IC databases' own, both from the
	// clusterset's CA, which the installer keeps.
	secrets := map[string]OVSDBTLS{}
	if cfg.Interconnected() {
		secrets[ictls.DefaultSecretName] = cfg.AZTLS(cl)
	}
	if cfg.ChartICDatabases && cl == 1 && !cfg.InsecurePlainTCP {
		secrets[ChartICDBSecret] = cfg.ChartICDBTLS()
	}
	for name, id := range secrets {
		kc, err := r.State.Kube(ClusterName(cl))
		if err != nil {
			return err
		}
		if err := retry(ctx, func() error { return applyTLSSecret(ctx, kc, name, id) }); err != nil {
			return fmt.Errorf("applying Secret %s: %w", name, err)
		}
	}
	dir := filepath.Join(cfg.Dir, "chart")
	if err := deploy.WriteChart(dir); err != nil {
		return err
	}
	args := append([]string{"upgrade", "--install", ChartRelease, dir, "--wait", "--timeout", "5m"}, r.HelmArgs(cl)...)
	for _, v := range cfg.ChartValues(cl) {
		args = append(args, "--set", v)
	}
	return r.helm(ctx, cl, args...)
}

// UninstallChart runs `helm uninstall` on cluster cl and waits for it (and its hooks).
func (r *Rig) UninstallChart(ctx context.Context, cl int) error {
	return r.helm(ctx, cl, append([]string{"uninstall", ChartRelease, "--wait", "--timeout", "5m"}, r.HelmArgs(cl)...)...)
}

func (r *Rig) helm(ctx context.Context, cl int, args ...string) error {
	start := time.Now()
	out, err := exec.CommandContext(ctx, r.State.Config.helmBin(), args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("cluster %s: helm %s: %w\n%s", ClusterName(cl), args[0], err, out)
	}
	fmt.Fprintf(os.Stderr, "kovn-rig: cluster %s: helm %s done in %.1fs\n", ClusterName(cl), args[0], time.Since(start).Seconds())
	return nil
}

// installCharts installs the chart on every cluster at once, each once its kubelets have
// registered (the chart's pods need the nodes).
func (r *Rig) installCharts(ctx context.Context) error {
	if !r.State.Config.Chart() {
		return nil
	}
	g, ctx := errgroup.WithContext(ctx)
	for i, ci := range r.State.Clusters {
		g.Go(func() error {
			kc, err := r.State.Kube(ci.Name)
			if err != nil {
				return err
			}
			for {
				nodes, err := kc.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
				if err == nil && len(nodes.Items) >= len(ci.Nodes) {
					break
				}
				select {
				case <-ctx.Done():
					return fmt.Errorf("cluster %s: nodes not registered before the chart install: %w", ci.Name, ctx.Err())
				case <-time.After(200 * time.Millisecond):
				}
			}
			return r.InstallChart(ctx, i+1)
		})
	}
	return g.Wait()
}

// uplinkKeeperStep is a chart-installed node's own network configuration for the userspace
// datapath, as a node image's network configuration would do for OVS: once the chart's OVS
// runs, br-phy (a netdev bridge) takes eth0 as a port and the node's addresses and routes, and
// gets them back whenever it comes back without them (ovs-vswitchd restarted); once the
// chart's OVS is gone for 5 s (helm uninstall), eth0 gets them back, so the node stays
// reachable without kovn and a later install finds it as a fresh node. br-phy takes eth0's MAC
// as well as its addresses: the node's neighbours, and the other nodes' OVS tunnel neighbour
// caches (which keep an entry for 15 minutes), learned that MAC while eth0 held the address.
func (c Config) uplinkKeeperStep(cl, n int, logs string) Step {
	ip := c.NodeIPs(cl, n)[0].String()
	run := c.NodeHostPath("ovs-run")
	vsctl := "ovs-vsctl --db=unix:" + filepath.Join(run, "db.sock")
	replace := func(dev string) []string {
		var cmds []string
		for _, a := range FabricAddrs(c.NodeIPs(cl, n)) {
			args := addrAddArgs(a, dev)
			args[1] = "replace"
			cmds = append(cmds, "ip "+strings.Join(args, " "))
		}
		return cmds
	}
	// The addresses are on the new holder before they leave the old one: the node stays reachable.
	toBridge := slices.Concat(replace("br-phy"), []string{"ip link set br-phy up", "ip addr flush dev eth0"},
		c.outsideRouteCmds(), []string{"ip link set eth0 arp off", "sysctl -qw net.ipv6.conf.eth0.disable_ipv6=1",
			"ethtool -K eth0 tx off >/dev/null", "ethtool -K br-phy tx off >/dev/null"})
	toNIC := slices.Concat([]string{"sysctl -qw net.ipv6.conf.eth0.disable_ipv6=0", "ip link set eth0 arp on"},
		replace("eth0"), []string{"ip addr flush dev br-phy"}, c.outsideRouteCmds())
	hasIP := "ip -br addr show dev br-phy 2>/dev/null | grep -qF ' " + ip + "/'"
	script := []string{
		"down=0",
		"while :; do",
		"  if " + vsctl + " --timeout=2 show >/dev/null 2>&1; then",
		"    down=0",
		"    if ! " + vsctl + " --timeout=2 br-exists br-phy; then",
		"      echo \"$(date -Is) the chart's OVS is up: br-phy takes eth0\"",
		"      mac=$(ip -o link show dev eth0 | sed -n 's/.*link\\/ether \\([0-9a-f:]*\\).*/\\1/p')",
		"      " + vsctl + " --timeout=10 -- --may-exist add-br br-phy -- set bridge br-phy datapath_type=netdev \"other-config:hwaddr=\\\"$mac\\\"\" -- --may-exist add-port br-phy eth0 || { sleep 1; continue; }",
		"    fi",
		"    if ovs-appctl -t " + filepath.Join(run, "ovs-vswitchd.ctl") + " version >/dev/null 2>&1 && ip link show br-phy >/dev/null 2>&1 && ! " + hasIP + "; then",
		"      echo \"$(date -Is) br-phy without the node addresses: moving them from eth0\"",
		"      " + strings.Join(toBridge, "; "),
		"    fi",
		"  else",
		"    down=$((down + 1))",
		"    if [ \"$down\" -ge 10 ] && " + hasIP + "; then",
		"      echo \"$(date -Is) the chart's OVS is gone: eth0 takes the node addresses back\"",
		"      " + strings.Join(toNIC, "; "),
		"    fi",
		"  fi",
		"  sleep 0.5",
		"done"}
	return Step{Name: "uplink-keeper", Daemon: true, Restart: true, Log: filepath.Join(logs, "uplink-keeper.log"),
		Argv: []string{"/bin/sh", "-c", strings.Join(script, "\n")}}
}

// OVNCentralLabel marks the nodes the chart runs OVN central on (nodes 1..Centrals() of each
// cluster).
const OVNCentralLabel = "node-restriction.kubernetes.io/kovn-ovn-central"

// chartNodeLabels are the chart's role labels of node n. Every node speaks BGP in the rig (as
// with processes): with no BgpPeer a speaker holds no session.
func (c Config) chartNodeLabels(n int) map[string]string {
	labels := map[string]string{SpeakerLabel: "true"}
	if n <= c.Centrals() {
		labels[OVNCentralLabel] = "true"
	}
	return labels
}

// labelChartNodes sets the role labels on cluster cl's nodes as an admin, once each has
// registered: they are under node-restriction.kubernetes.io/, which a kubelet may not set on
// its own Node (NodeRestriction), so not with --node-labels either.
func (r *Rig) labelChartNodes(ctx context.Context, cl int) error {
	cfg := r.State.Config
	kc, err := r.State.Kube(ClusterName(cl))
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	for n := 1; n <= cfg.Nodes; n++ {
		patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"labels": cfg.chartNodeLabels(n)}})
		if err != nil {
			return err
		}
		if err := retry(ctx, func() error {
			_, err := kc.CoreV1().Nodes().Patch(ctx, NodeName(cl, n), types.MergePatchType, patch, metav1.PatchOptions{})
			return err
		}); err != nil {
			return fmt.Errorf("labelling node %s: %w", NodeName(cl, n), err)
		}
	}
	return nil
}

// SpeakerLabel is the chart's default speaker.nodeSelector.
const SpeakerLabel = "node-restriction.kubernetes.io/kovn-bgp-speaker"

func addrStrings(as []netip.Addr) []string {
	out := make([]string, len(as))
	for i, a := range as {
		out[i] = a.String()
	}
	return out
}

// centralAddresses are the primary addresses of cluster cl's central nodes.
func (c Config) centralAddresses(cl int) []string {
	var out []string
	for n := 1; n <= c.Centrals(); n++ {
		out = append(out, c.NodeIPs(cl, n)[0].String())
	}
	return out
}
