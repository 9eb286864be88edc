package e2e

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kovn/kovn/deploy"
	"github.com/kovn/kovn/test/rig"
)

// TestMetrics: kovn-daemon serves /livez, /readyz and metrics on every node, kovn-controller
// its metrics on the control plane; the key series exist and move: a pod started on c1-n1
// adds one successful CNI ADD and one network-ready observation there and one used address to
// its subnet; ovn-controller stopped on c1-n2 reads 0 there and 1 again once it is back.
func TestMetrics(t *testing.T) {
	concurrent(t) // waits on conditions only: no loss counted, nothing timed
	cfg := rigConfig(t, 1, 2)
	cfg.Kovn = true
	r := upRig(t, cfg)
	c := newCluster(t, r, "c1")
	node := func(n int) string {
		return nodeTestbox(t, r.State, cfg.NodeNS(1, n), "get", "http://127.0.0.1:9474/metrics")
	}
	controller := func() string {
		return nodeTestbox(t, r.State, cfg.ControlPlaneNS(1), "get", fmt.Sprintf("http://127.0.0.1:%d/metrics", rig.PortControllerMetrics))
	}
	for _, path := range []string{"/livez", "/readyz"} {
		if out := nodeTestbox(t, r.State, cfg.ControlPlaneNS(1), "get", fmt.Sprintf("http://127.0.0.1:%d%s", rig.PortControllerHealth, path)); !strings.Contains(out, "ok") {
			t.Errorf("kovn-controller %s: %q", path, out)
		}
	}
	for n := 1; n <= 2; n++ {
		for _, probe := range []string{"9475/livez", "9475/readyz", "9473/livez", "9473/readyz"} { // kovn-daemon, kovn-speaker
			if out := nodeTestbox(t, r.State, cfg.NodeNS(1, n), "get", "http://127.0.0.1:"+probe); !strings.Contains(out, "ok") {
				t.Errorf("c1-n%d :%s: %q", n, probe, out)
			}
		}
		for _, s := range []string{"kovn_node_ovs_up 1", "kovn_node_ovn_controller_up 1"} {
			if out := node(n); !strings.Contains(out, s) {
				t.Errorf("c1-n%d metrics lack %q", n, s)
			}
		}
	}
	for _, s := range []string{`kovn_ovsdb_connected{db="nb"} 1`, `kovn_ovsdb_connected{db="sb"} 1`,
		`leader_election_master_status{name="kovn-controller"} 1`, `controller_runtime_reconcile_total{controller="subnet",result="success"}`,
		`kovn_nb_transactions_total{owner_type="Subnet"}`} {
		if out := controller(); !strings.Contains(out, s) {
			t.Errorf("kovn-controller metrics lack %q", s)
		}
	}

	adds := func() float64 {
		return value(node(1), `kovn_cni_request_duration_seconds_count{command="ADD",result="success"}`)
	}
	ready := func() float64 { return value(node(1), "kovn_pod_network_ready_seconds_count") }
	used := func() float64 {
		return value(controller(), `kovn_subnet_addresses{family="ipv4",state="used",subnet="ovn-default"}`)
	}
	// The baseline once the rig's own pods (cluster DNS) have their networks: they start with it.
	if err := eventually(90*time.Second, func() error {
		out, err := c.kubectl("get", "pods", "-A", "-o", `jsonpath={range .items[*]}{.status.phase}{" "}{end}`)
		if err != nil || strings.TrimSpace(strings.ReplaceAll(out, "Running", "")) != "" {
			return fmt.Errorf("pod phases %q %v", out, err)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second)
	adds0, ready0, used0 := adds(), ready(), used()
	c.createPod(testboxPod("default", "metrics-probe", onNode(rig.NodeName(1, 1))))
	c.waitRunning("default", "metrics-probe", 90*time.Second)
	if err := eventually(10*time.Second, func() error {
		if a, rd, u := adds(), ready(), used(); a != adds0+1 || rd != ready0+1 || u != used0+1 {
			return fmt.Errorf("CNI ADDs %v -> %v, network-ready observations %v -> %v, used addresses %v -> %v; want each +1",
				adds0, a, ready0, rd, used0, u)
		}
		return nil
	}); err != nil {
		t.Error(err)
	}
	t.Logf("one pod on c1-n1: CNI ADDs %v -> %v, network-ready observations %v -> %v (sum %.1fs), ovn-default used %v -> %v",
		adds0, adds(), ready0, ready(), value(node(1), "kovn_pod_network_ready_seconds_sum"), used0, used())

	if err := r.State.StopDaemon(rig.NodeName(1, 2), "ovn-controller"); err != nil {
		t.Fatal(err)
	}
	waitSeries(t, node, 2, "kovn_node_ovn_controller_up 0")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := r.State.StartDaemon(ctx, rig.NodeName(1, 2), "ovn-controller"); err != nil {
		t.Fatal(err)
	}
	waitSeries(t, node, 2, "kovn_node_ovn_controller_up 1")
	if out := node(1); !strings.Contains(out, "kovn_node_ovn_controller_up 1") {
		t.Error("c1-n1's ovn-controller read as down while only c1-n2's stopped")
	}
	nodeOVSSeries(t, cfg, node)
}

// nodeOVSSeries: each node's OpenFlow flow count is what ovs-ofctl dump-aggregate counts on
// its br-int, datapath flows are exported, and its one tunnel (to the other node) is counted
// (no BFD: the rig has no gateway chassis here).
func nodeOVSSeries(t *testing.T, cfg rig.Config, node func(int) string) {
	flowCount := regexp.MustCompile(`flow_count=(\d+)`)
	for n := 1; n <= 2; n++ {
		var got, want float64
		if err := eventually(20*time.Second, func() error {
			mgmt := "unix:" + filepath.Join(filepath.Dir(cfg.OVSDBSocket(1, n)), "br-int.mgmt")
			out, err := exec.Command("ovs-ofctl", "dump-aggregate", mgmt).CombinedOutput()
			m := flowCount.FindSubmatch(out)
			if err != nil || m == nil {
				return fmt.Errorf("ovs-ofctl dump-aggregate: %v %s", err, out)
			}
			want, _ = strconv.ParseFloat(string(m[1]), 64)
			got = value(node(n), `kovn_node_openflow_flows{bridge="br-int"}`)
			if got != want || want < 50 {
				return fmt.Errorf("kovn_node_openflow_flows %v, ovs-ofctl counts %v", got, want)
			}
			return nil
		}); err != nil {
			t.Errorf("c1-n%d: %v", n, err)
		}
		out := node(n)
		for _, s := range []string{"kovn_node_tunnels 1", `kovn_node_tunnels_bfd{state="up"} 0`, "kovn_node_datapath_flows "} {
			if !strings.Contains(out, s) {
				t.Errorf("c1-n%d metrics lack %q", n, s)
			}
		}
		t.Logf("c1-n%d: %v OpenFlow flows on br-int (as ovs-ofctl counts), %v datapath flows", n, got, value(out, "kovn_node_datapath_flows"))
	}
}

// waitSeries waits (10 s) for node n's metrics to hold the line want.
func waitSeries(t *testing.T, node func(int) string, n int, want string) {
	t.Helper()
	if err := eventually(10*time.Second, func() error {
		if !strings.Contains(node(n), want) {
			return fmt.Errorf("c1-n%d metrics lack %q", n, want)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

// value is the sample of the series named exactly (with its labels) in Prometheus text; 0
// when absent.
func value(text, series string) float64 {
	for _, l := range strings.Split(text, "\n") {
		if rest, ok := strings.CutPrefix(l, series+" "); ok {
			v, _ := strconv.ParseFloat(strings.TrimSpace(rest), 64)
			return v
		}
	}
	return 0
}

// controllerMetrics is cluster cl's kovn-controller metrics text.
func controllerMetrics(t *testing.T, cfg rig.Config, r *rig.Rig, cl int) string {
	t.Helper()
	return nodeTestbox(t, r.State, cfg.ControlPlaneNS(cl), "get", fmt.Sprintf("http://127.0.0.1:%d/metrics", rig.PortControllerMetrics))
}

// waitControllerSeries waits up to 30 s until cluster cl's kovn-controller serves every series
// with its value, each written as in Prometheus text (`name{labels} value`).
func waitControllerSeries(t *testing.T, cfg rig.Config, r *rig.Rig, cl int, want ...string) {
	t.Helper()
	if err := eventually(30*time.Second, func() error {
		out := controllerMetrics(t, cfg, r, cl)
		var lack []string
		for _, w := range want {
			series, v, _ := strings.Cut(w, "} ")
			if got := value(out, series+"}"); !strings.Contains(out, series+"} ") || strconv.FormatFloat(got, 'g', -1, 64) != v {
				lack = append(lack, fmt.Sprintf("%s} %s (got %v)", series, v, got))
			}
		}
		if len(lack) > 0 {
			return fmt.Errorf("c%d kovn-controller metrics lack %s", cl, strings.Join(lack, ", "))
		}
		return nil
	}); err != nil {
		t.Error(err)
	}
}

// checkDashboardSeries: every series the Grafana dashboard reads from component is in its
// scrape (a histogram's _bucket/_sum/_count by the histogram's own TYPE line).
func checkDashboardSeries(t *testing.T, component, scrape string) {
	t.Helper()
	names, err := deploy.DashboardNames(component)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range names {
		found := strings.Contains(scrape, "# TYPE "+n+" ")
		for _, suffix := range []string{"_bucket", "_sum", "_count"} {
			if base, ok := strings.CutSuffix(n, suffix); ok && strings.Contains(scrape, "# TYPE "+base+" histogram") {
				found = true
			}
		}
		if !found {
			t.Errorf("the dashboard reads %s, which %s does not serve", n, component)
		}
	}
	t.Logf("%s serves all %d series the dashboard reads from it", component, len(names))
}
