package rig

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

// startForwarder exposes each cluster's apiserver, NB and SB (and the IC databases) on host
// loopback ports and writes host kubeconfigs that use them. The rig opens the listeners and
// the forwarder inherits them, so a port cannot be taken between its choice and its use.
func (r *Rig) startForwarder(ctx context.Context) error {
	cfg, st := r.State.Config, r.State
	var fws []Forward
	var files []*os.File
	defer func() {
		for _, f := range files {
			f.Close() // the forwarder holds its own copies
		}
	}()
	add := func(key, ns string, target string) error {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return err
		}
		f, err := l.(*net.TCPListener).File()
		l.Close() // f is a duplicate: the socket stays open and listening
		if err != nil {
			return err
		}
		files = append(files, f)
		fws = append(fws, Forward{Listen: l.Addr().String(), NetNS: ns, Target: target, FD: 2 + len(files)})
		st.Forwards[key] = fws[len(fws)-1].Listen
		return nil
	}
	for cl := 1; cl <= cfg.Clusters; cl++ {
		ns, ip := cfg.ControlPlaneNS(cl), cfg.ControlPlaneIPs(cl)[0]
		if err := add(ClusterName(cl)+"/apiserver", ns, hostPort(ip, PortAPIServer)); err != nil {
			return err
		}
		if cfg.Chart() {
			// The chart runs OVN central on node 1.
			ns, ip = cfg.NodeNS(cl, 1), cfg.NodeIPs(cl, 1)[0]
		}
		for key, port := range map[string]int{"nb": PortNB, "sb": PortSB} {
			if err := add(ClusterName(cl)+"/"+key, ns, hostPort(ip, port)); err != nil {
				return err
			}
		}
	}
	spec := filepath.Join(cfg.Dir, "forward.json")
	b, _ := json.MarshalIndent(fws, "", "  ")
	if err := os.WriteFile(spec, b, 0o644); err != nil {
		return err
	}
	_ = os.Remove(forwarderReady(spec))
	log := filepath.Join(cfg.Dir, "forward.log")
	pid, err := startDetachedFiles(log, files, filepath.Join(cfg.KovnBinDir, "kovn-rig"), "forward", spec)
	if err != nil {
		return err
	}
	st.Procs = append(st.Procs, Proc{Name: "forwarder", Pid: pid, Log: log})
	if err := waitForwarder(ctx, spec, pid, log); err != nil {
		return err
	}
	for cl := 1; cl <= cfg.Clusters; cl++ {
		ci := ClusterInfo{Name: ClusterName(cl), Kubeconfig: filepath.Join(cfg.ClusterDir(cl), "kubeconfig"),
			NBAddr: cfg.ovnLocal(cl, "nb"), SBAddr: cfg.ovnLocal(cl, "sb"), FakeNodes: cfg.FakeNodes}
		if cfg.Chart() {
			// The chart's OVN central member on node 1, through its unix sockets (its network
			// listeners take mutual TLS; with several members this one may follow: tools
			// then need --no-leader-only).
			ci.NBAddr, ci.SBAddr = "unix:"+cfg.chartOVNSocket(cl, "ovnnb_db"), "unix:"+cfg.chartOVNSocket(cl, "ovnsb_db")
		}
		for n := 1; n <= cfg.Nodes; n++ {
			ci.Nodes = append(ci.Nodes, NodeName(cl, n))
		}
		if err := r.pkis[cl].writeKubeconfig(ci.Kubeconfig, ci.Name, "https://"+st.Forwards[ci.Name+"/apiserver"], "admin", r.pkis[cl].AdminToken); err != nil {
			return err
		}
		st.Clusters = append(st.Clusters, ci)
	}
	return nil
}

// waitForwarder waits for the forwarder started with spec (pid) to serve every listener.
func waitForwarder(ctx context.Context, spec string, pid int, log string) error {
	for {
		if _, err := os.Stat(forwarderReady(spec)); err == nil {
			return nil
		}
		if !Alive(pid) {
			return fmt.Errorf("the forwarder exited during start-up (log: %s)", log)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("forwarder not ready: %w (log: %s)", ctx.Err(), log)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// ovnLocal is cluster cl's NB or SB ("nb", "sb") unix socket: the rig's tools and tests reach
// the databases as an operator on the central host does, with no certificate.
func (c Config) ovnLocal(cl int, db string) string {
	return "unix:" + filepath.Join(c.runDir(), ClusterName(cl), db+".sock")
}

// Kube returns a clientset for a cluster (through the host forwarder).
func (s *State) Kube(cluster string) (kubernetes.Interface, error) {
	for _, c := range s.Clusters {
		if c.Name == cluster {
			rc, err := clientcmd.BuildConfigFromFlags("", c.Kubeconfig)
			if err != nil {
				return nil, err
			}
			rc.Timeout = 10 * time.Second
			return kubernetes.NewForConfig(rc)
		}
	}
	return nil, fmt.Errorf("no cluster %q in this rig", cluster)
}

func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func allReady(nodes []corev1.Node) bool {
	for i := range nodes {
		if !nodeReady(&nodes[i]) {
			return false
		}
	}
	return true
}

// waitNodesRegistered waits until every kubelet has created its Node object.
func (r *Rig) waitNodesRegistered(ctx context.Context) error {
	for _, ci := range r.State.Clusters {
		kc, err := r.State.Kube(ci.Name)
		if err != nil {
			return err
		}
		for {
			nodes, err := kc.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
			if err == nil && len(nodes.Items) == len(ci.Nodes)+ci.FakeNodes && (!r.State.Config.Kovn || allReady(nodes.Items)) {
				break
			}
			select {
			case <-ctx.Done():
				n := 0
				if nodes != nil {
					n = len(nodes.Items)
				}
				return fmt.Errorf("cluster %s: %d of %d nodes registered (Ready required: %v): %w (last error: %v)", ci.Name, n, len(ci.Nodes)+ci.FakeNodes, r.State.Config.Kovn, ctx.Err(), err)
			case <-time.After(200 * time.Millisecond):
			}
		}
	}
	return nil
}
