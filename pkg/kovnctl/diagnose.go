package kovnctl

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kovn/kovn/pkg/annotation"
	"github.com/kovn/kovn/pkg/ovn"
	"github.com/kovn/kovn/pkg/ovn/model/nb"
	"github.com/kovn/kovn/pkg/ovn/model/sb"
	"github.com/kovn/kovn/pkg/ovn/model/vswitch"
)

// Check is one diagnosis: what was checked on which object, the verdict, why, and the fix.
type Check struct {
	Check  string `json:"check"`
	Object string `json:"object"`
	OK     bool   `json:"ok"`
	Detail string `json:"detail"`
	Fix    string `json:"fix,omitempty"`
}

// NodeReading is what diagnose read on one node through its kovn-ovs pod; an empty error
// string means the command worked.
type NodeReading struct {
	Node        string
	VswitchdErr string
	OVSDBErr    string // reading the node's Open_vSwitch database failed
	BrInt       bool
	OVNConn     string // ovn-controller's connection-status
	OVNConnErr  string
	Tunnels     int // geneve interfaces on br-int (interconnect gateways add those to other clusters)
	OtherNodes  int // kovn nodes besides this one
	Ovn0Addrs   string
	JoinIP      string // the node's join address (kovn-controller's annotation)
	NoOVSPod    bool
	NoOVSPodWhy string
}

// NodeChecks judges one node's reading.
func NodeChecks(r NodeReading) []Check {
	obj := "node/" + r.Node
	if r.NoOVSPod {
		return []Check{{Check: "OVS pod", Object: obj, Detail: r.NoOVSPodWhy,
			Fix: "kubectl -n kube-system get ds kovn-ovs; a node outside its tolerations or selector has no OVS"}}
	}
	var out []Check
	add := func(check string, ok bool, detail, fix string) {
		c := Check{Check: check, Object: obj, OK: ok, Detail: detail}
		if !ok {
			c.Fix = fix
		}
		out = append(out, c)
	}
	add("ovs-vswitchd answers", r.VswitchdErr == "", either(r.VswitchdErr == "", "ovs-appctl version answered", r.VswitchdErr),
		"kubectl -n kube-system logs <kovn-ovs pod on the node> -c vswitchd")
	switch {
	case r.OVSDBErr != "":
		add("br-int exists", false, "reading the node's OVS database: "+r.OVSDBErr,
			"kubectl -n kube-system logs <kovn-ovs pod on the node> -c ovsdb")
	default:
		add("br-int exists", r.BrInt, either(r.BrInt, "br-int is in the OVS database", "no br-int: ovn-controller has not created it"),
			"check the ovn-controller container of the node's kovn-ovs pod")
	}
	connected := r.OVNConnErr == "" && strings.TrimSpace(r.OVNConn) == "connected"
	switch {
	case strings.Contains(r.OVNConnErr, "pidfile"):
		add("ovn-controller connected to SB", false, "ovn-controller is not running (no pidfile)",
			"check the ovn-controller container of the node's kovn-ovs pod and its logs")
	default:
		add("ovn-controller connected to SB", connected, either(connected, "connected", strings.TrimSpace(r.OVNConn+" "+r.OVNConnErr)),
			"ovn-controller must reach OVN SB (ovn-remote): check kovn-ovn-central's pods and the network to them")
	}
	tunnelsOK := r.OVSDBErr == "" && r.Tunnels >= r.OtherNodes
	tunnels := fmt.Sprintf("%d geneve tunnels on br-int for %d other nodes", r.Tunnels, r.OtherNodes)
	if r.OVSDBErr != "" {
		tunnels = "unknown: the node's OVS database could not be read"
	}
	add("geneve tunnels", tunnelsOK, tunnels,
		"every node's ovn-encap-ip must be reachable over UDP 6081; check the other nodes' Chassis and Encap rows in OVN SB (gather's ovn/sb-dump.json)")
	ovn0 := r.JoinIP != ""
	for _, ip := range strings.Split(r.JoinIP, ",") {
		ovn0 = ovn0 && strings.Contains(r.Ovn0Addrs, " "+strings.TrimSpace(ip)+"/")
	}
	add("ovn0 holds the join address", ovn0, either(ovn0, "ovn0 has "+r.JoinIP, fmt.Sprintf("join address %q, ovn0: %s", r.JoinIP, strings.TrimSpace(r.Ovn0Addrs))),
		"kubectl -n kube-system logs <kovn-daemon pod on the node>: the daemon plumbs ovn0 once kovn-controller annotated the node")
	return out
}

func either(ok bool, yes, no string) string {
	if ok {
		return yes
	}
	return no
}

// Diagnose runs every check: the status report's problems, OVN central's databases and
// northd, and on each node OVS, br-int, ovn-controller's SB connection, tunnels and ovn0.
func Diagnose(ctx context.Context, c client.Client, e *Execer) ([]Check, error) {
	in, err := Collect(ctx, c)
	if err != nil {
		return nil, err
	}
	var checks []Check
	r := Build(in)
	for _, p := range r.Problems {
		checks = append(checks, Check{Check: "status", Object: p.Object, Detail: p.Fault, Fix: p.Fix})
	}
	if len(r.Problems) == 0 {
		checks = append(checks, Check{Check: "status", Object: "kovn", OK: true, Detail: "kovn's objects and nodes report no problem"})
	}
	checks = append(checks, centralChecks(ctx, e)...)
	for _, r := range readNodes(ctx, e, in.Nodes) {
		checks = append(checks, NodeChecks(r)...)
	}
	return checks, nil
}

func centralChecks(ctx context.Context, e *Execer) []Check {
	pods, err := e.Kube.CoreV1().Pods(KovnNamespace).List(ctx, metav1.ListOptions{LabelSelector: "app=" + CentralApp})
	if err != nil || len(pods.Items) == 0 {
		return []Check{{Check: "OVN central", Object: "kube-system/" + CentralApp, Detail: fmt.Sprintf("no pod (%v)", err),
			Fix: "kubectl -n kube-system get ds,deploy,sts | grep ovn-central; kovn's chart runs it on nodes labelled node-restriction.kubernetes.io/kovn-ovn-central"}}
	}
	var out []Check
	active := 0
	for _, p := range pods.Items {
		obj := "pod/" + p.Name
		for _, db := range []struct{ name, db, sock, global string }{
			{"NB", "nb", NBSocket, nb.NBGlobalTable}, {"SB", "sb", SBSocket, sb.SBGlobalTable},
		} {
			// One small table read through libovsdb: the database answers and serves its schema.
			_, err := e.Dump(ctx, p.Name, CentralContainer, db.db, db.sock, db.global)
			c := Check{Check: "OVN " + db.name + " answers", Object: obj, OK: err == nil, Detail: db.sock + " serves " + db.global}
			if err != nil {
				c.Detail, c.Fix = err.Error(), "kubectl -n kube-system logs "+p.Name+" -c "+strings.ToLower(db.name)
			}
			out = append(out, c)
		}
		st, err := e.Output(ctx, p.Name, CentralContainer, "ovn-appctl", "-t", "/var/run/ovn/ovn-northd.ctl", "status")
		if err == nil && strings.Contains(st, "active") {
			active++
		}
	}
	c := Check{Check: "ovn-northd active", Object: "kube-system/" + CentralApp, OK: active == 1,
		Detail: fmt.Sprintf("%d of %d ovn-northd active", active, len(pods.Items))}
	if !c.OK {
		c.Fix = "exactly one ovn-northd must be active (the others standby): check the northd containers' logs and the SB lock"
	}
	return append(out, c)
}

// nodeParallelism bounds how many nodes diagnose reads at once (each read is 4 execs through
// the API server).
const nodeParallelism = 8

// readNodes reads every node, nodeParallelism at a time, in the nodes' order.
func readNodes(ctx context.Context, e *Execer, nodes []corev1.Node) []NodeReading {
	out := make([]NodeReading, len(nodes))
	sem := make(chan struct{}, nodeParallelism)
	var wg sync.WaitGroup
	for i := range nodes {
		wg.Add(1)
		sem <- struct{}{}
		go func(i int) {
			defer func() { <-sem; wg.Done() }()
			out[i] = readNode(ctx, e, nodes[i], len(nodes)-1)
		}(i)
	}
	wg.Wait()
	return out
}

func readNode(ctx context.Context, e *Execer, n corev1.Node, others int) NodeReading {
	r := NodeReading{Node: n.Name, OtherNodes: others, JoinIP: n.Annotations[annotation.JoinIP]}
	pod, err := e.NodePod(ctx, OVSApp, n.Name)
	if err != nil {
		r.NoOVSPod, r.NoOVSPodWhy = true, err.Error()
		return r
	}
	run := func(container string, argv ...string) (string, string) {
		out, err := e.Output(ctx, pod, container, argv...)
		if err != nil {
			return out, err.Error()
		}
		return out, ""
	}
	_, r.VswitchdErr = run(OVSContainer, "ovs-appctl", "-t", VswitchdCtl, "version")
	r.OVNConn, r.OVNConnErr = run(OVNControllerContainer, "ovn-appctl", "-t", "ovn-controller", "connection-status")
	r.Ovn0Addrs, _ = run(OVSContainer, "ip", "-br", "addr", "show", "dev", "ovn0")
	dump, err := e.Dump(ctx, pod, OVSContainer, "ovs", OVSSocket, vswitch.BridgeTable, vswitch.InterfaceTable)
	if err != nil {
		r.OVSDBErr = err.Error()
		return r
	}
	bridges, err1 := ovn.DecodeRows[vswitch.Bridge](dump, vswitch.BridgeTable)
	ifaces, err2 := ovn.DecodeRows[vswitch.Interface](dump, vswitch.InterfaceTable)
	if err := errors.Join(err1, err2); err != nil {
		r.OVSDBErr = err.Error()
		return r
	}
	r.BrInt = slices.ContainsFunc(bridges, func(b vswitch.Bridge) bool { return b.Name == "br-int" })
	for _, i := range ifaces {
		if i.Type == "geneve" {
			r.Tunnels++
		}
	}
	return r
}
