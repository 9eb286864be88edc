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

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// startForwarder exposes each cluster's apiserver, NB and SB (and the IC databases) on host
// loopback ports and writes host kubeconfigs that use them.
func (r *Rig) startForwarder(ctx context.Context) error {
	cfg, st := r.State.Config, r.State
	var fws []Forward
	add := func(key, ns string, target string) error {
		p, err := freePort()
		if err != nil {
			return err
		}
		fws = append(fws, Forward{Listen: fmt.Sprintf("127.0.0.1:%d", p), NetNS: ns, Target: target})
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
	pid, err := startDetached(filepath.Join(cfg.Dir, "forward.log"), false, filepath.Join(cfg.KovnBinDir, "kovn-rig"), "forward", spec)
	if err != nil {
		return err
	}
	st.Procs = append(st.Procs, Proc{Name: "forwarder", Pid: pid, Log: filepath.Join(cfg.Dir, "forward.log")})
	for _, f := range fws {
		if err := waitDial(ctx, f.Listen); err != nil {
			return fmt.Errorf("forwarder %s: %w (log: %s)", f.Listen, err, filepath.Join(cfg.Dir, "forward.log"))
		}
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

// ovnLocal is cluster cl's NB or SB ("nb", "sb") unix socket: the rig's tools and tests reach
// the databases as an operator on the central host does, with no certificate.
func (c Config) ovnLocal(cl int, db string) string {
	return "unix:" + filepath.Join(c.runDir(), ClusterName(cl), db+".sock")
}

func waitDial(ctx context.Context, addr string) error {
	for !dialOK("tcp", addr) {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
	return nil
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
