package e2e

import (
	"archive/tar"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/kovn/kovn/pkg/kovnctl"
	"github.com/kovn/kovn/pkg/ovn"
	"github.com/kovn/kovn/pkg/ovn/model/nb"
	"github.com/kovn/kovn/pkg/ovn/model/sb"
	"github.com/kovn/kovn/pkg/ovn/model/vswitch"
)

// kubectlKovnOps checks kubectl-kovn's commands that run OVS and OVN tools in the chart's pods
// (trace, tcpdump, diagnose, gather) on a chart install with pods a (c1-n1) and b (c1-n2)
// and the Service svc/echo.
func kubectlKovnOps(t *testing.T, c *cluster, a, b *corev1.Pod, echoVIPs []string) {
	cfg := c.st.Config
	kovn := c.kubectlKovn

	t.Run("trace: pod to pod on another node and pod to ClusterIP, both families", func(t *testing.T) {
		for _, v6 := range []bool{false, true} {
			out, errOut, err := kovn("trace", "default/a", podIP(t, b, v6), "--port", "80", "-o", "json")
			var r kovnctl.TraceResult
			if err != nil || json.Unmarshal([]byte(out), &r) != nil {
				t.Fatalf("trace a -> b: %v %s %s", err, out, errOut)
			}
			if r.Verdict != "delivered to logical port b.default" || r.Node != "c1-n1" ||
				!strings.Contains(r.Physical, "Datapath actions:") || !strings.Contains(r.Physical, "tnl_push") {
				t.Errorf("trace a -> b (IPv6 %t): verdict %q on %s; the OpenFlow trace must end in a tunnel push to c1-n2:\n%s\n%s",
					v6, r.Verdict, r.Node, r.Logical, r.Physical)
			}
		}
		for _, vip := range echoVIPs {
			out, errOut, err := kovn("trace", "svc/client", vip, "--port", "80")
			if err != nil || !strings.Contains(out, "service: svc/echo's ClusterIP") || !strings.Contains(out, "Datapath actions: ct(") ||
				!strings.Contains(out, "verdict: delivered to logical port be") {
				t.Errorf("trace svc/client -> %s: want svc/echo named, conntrack in the OpenFlow trace and a backend's port: %v\n%s%s",
					vip, err, out, errOut)
			} else {
				t.Logf("kubectl kovn trace svc/client %s:\n%s", vip, out)
			}
		}
		if _, errOut, err := kovn("trace", "default/a", "10.16.0.300"); err == nil || !strings.Contains(errOut, "destination") {
			t.Errorf("a bad destination: %v %s", err, errOut)
		}
	})

	t.Run("tcpdump: exactly pod a's pings to b on a's interface", func(t *testing.T) {
		bIP := podIP(t, b, false)
		cmd := exec.Command(filepath.Join(cfg.K8sBinDir, "kubectl"), "kovn", "tcpdump", "default/a", "-c", fmt.Sprint(2*pingCount), "--", "icmp")
		cmd.Env = append(os.Environ(), "PATH="+cfg.KovnBinDir+":"+os.Getenv("PATH"), "KUBECONFIG="+c.info.Kubeconfig)
		var o strings.Builder
		stderr, _ := cmd.StderrPipe()
		cmd.Stdout = &o
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		// tcpdump says "listening on" once the capture runs; the plugin's line comes first.
		started := make(chan string, 1)
		go func() {
			b, _ := io.ReadAll(io.LimitReader(stderr, 4096))
			started <- string(b)
		}()
		time.Sleep(3 * time.Second)
		c.ping("default", "a", bIP)
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("kubectl kovn tcpdump: %v\n%s%s", err, o.String(), <-started)
			}
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			t.Fatalf("kubectl kovn tcpdump -c %d did not finish 30 s after the pings:\n%s", 2*pingCount, o.String())
		}
		var req, rep int
		for _, l := range strings.Split(strings.TrimSpace(o.String()), "\n") {
			switch {
			case strings.Contains(l, a.Status.PodIP+" > "+bIP) && strings.Contains(l, "echo request"):
				req++
			case strings.Contains(l, bIP+" > "+a.Status.PodIP) && strings.Contains(l, "echo reply"):
				rep++
			default:
				t.Errorf("a packet that is not a's ping: %s", l)
			}
		}
		if req != pingCount || rep != pingCount {
			t.Errorf("captured %d requests and %d replies, want %d each:\n%s", req, rep, pingCount, o.String())
		}
		t.Logf("kubectl kovn tcpdump default/a: %d echo requests and %d replies\n%s", req, rep, <-started)
	})

	t.Run("diagnose: every check passes; ovn-controller stopped on c1-n2 fails exactly that node's SB check", func(t *testing.T) {
		var checks []kovnctl.Check
		diagnose := func() error {
			out, errOut, err := kovn("diagnose", "-o", "json")
			checks = nil
			if jerr := json.Unmarshal([]byte(out), &checks); jerr != nil {
				return fmt.Errorf("not checks (%v): %s %s", jerr, out, errOut)
			}
			return err
		}
		if err := eventually(30*time.Second, diagnose); err != nil {
			t.Fatalf("healthy chart install: %v %+v", err, failedChecks(checks))
		}
		// status, NB, SB, northd, and 5 per node
		if want := 4 + 5*cfg.Nodes; len(checks) != want {
			t.Errorf("%d checks, want %d: %+v", len(checks), want, checks)
		}
		stopComponent(t, c, "c1-n2", "ovn-controller", false)
		defer startComponent(t, c, "c1-n2", "ovn-controller")
		var exit *exec.ExitError
		err := diagnose()
		failed := failedChecks(checks)
		if !errors.As(err, &exit) || exit.ExitCode() != 1 {
			t.Errorf("ovn-controller stopped: exit %v, want 1", err)
		}
		sbCheck := false
		for _, f := range failed {
			switch {
			case f.Object == "node/c1-n2" && f.Check == "ovn-controller connected to SB":
				sbCheck = f.Fix != ""
			case f.Check == "status" && f.Object == "node/c1-n2":
			default:
				t.Errorf("failed, and should not have: %+v", f)
			}
		}
		if !sbCheck {
			t.Errorf("c1-n2's ovn-controller check did not fail (with a fix): %+v", failed)
		}
		out, _, _ := kovn("diagnose")
		t.Logf("kubectl kovn diagnose with c1-n2's ovn-controller stopped:\n%s", out)
	})

	t.Run("gather: objects, status, logs, NB and SB dumps, each node's OVS in one bundle", func(t *testing.T) {
		dir := t.TempDir()
		out, errOut, err := kovn("gather", "-d", dir, "-o", "json")
		var res struct {
			Path string `json:"path"`
			kovnctl.GatherResult
		}
		if err != nil || json.Unmarshal([]byte(out), &res) != nil {
			t.Fatalf("gather: %v %s %s", err, out, errOut)
		}
		if len(res.Errors) > 0 {
			t.Errorf("not gathered: %v", res.Errors)
		}
		files := bundleFiles(t, res.Path)
		want := map[string]string{
			"kovn-gather/objects/subnets.yaml":                      "ovn-default",
			"kovn-gather/status.txt":                                "",
			"kovn-gather/ovn/nb-dump.json":                          "Logical_Switch_Port",
			"kovn-gather/ovn/sb-dump.json":                          "Port_Binding",
			"kovn-gather/nodes/c1-n1/br-int-flows.txt":              "table=",
			"kovn-gather/nodes/c1-n2/ovs-dump.json":                 "br-int",
			"kovn-gather/nodes/c1-n2/ovn-controller-connection.txt": "connected",
		}
		for name, has := range want {
			if body, ok := files[name]; !ok || !strings.Contains(body, has) {
				t.Errorf("%s: present %t, want it to hold %q", name, ok, has)
			}
		}
		// The dumps are libovsdb's typed rows: pod a's port in NB, bound in SB, br-int on c1-n2.
		rows := func(file string) map[string]json.RawMessage {
			var dump map[string]json.RawMessage
			if err := json.Unmarshal([]byte(files["kovn-gather/"+file]), &dump); err != nil {
				t.Errorf("%s: %v", file, err)
			}
			return dump
		}
		lsps, err := ovn.DecodeRows[nb.LogicalSwitchPort](rows("ovn/nb-dump.json"), nb.LogicalSwitchPortTable)
		bindings, err2 := ovn.DecodeRows[sb.PortBinding](rows("ovn/sb-dump.json"), sb.PortBindingTable)
		bridges, err3 := ovn.DecodeRows[vswitch.Bridge](rows("nodes/c1-n2/ovs-dump.json"), vswitch.BridgeTable)
		if err := errors.Join(err, err2, err3); err != nil {
			t.Errorf("decoding the dumps: %v", err)
		}
		aEnd, err := kovnctl.PodEndOf(a)
		if err != nil {
			t.Fatal(err)
		}
		aPort := aEnd.Port
		if !slices.ContainsFunc(lsps, func(p nb.LogicalSwitchPort) bool { return p.Name == aPort }) ||
			!slices.ContainsFunc(bindings, func(b sb.PortBinding) bool { return b.LogicalPort == aPort && b.Chassis != nil }) ||
			!slices.ContainsFunc(bridges, func(b vswitch.Bridge) bool { return b.Name == "br-int" }) {
			t.Errorf("dumps: %d switch ports, %d port bindings, %d bridges on c1-n2; want %s in NB, bound in SB, and br-int",
				len(lsps), len(bindings), len(bridges), aPort)
		}
		logs := 0
		for name, body := range files {
			if strings.HasPrefix(name, "kovn-gather/logs/kovn-controller-") && strings.HasSuffix(name, "/controller.log") && len(body) > 0 {
				logs++
			}
		}
		if logs != 2 {
			t.Errorf("%d kovn-controller logs in the bundle, want 2", logs)
		}
		t.Logf("kubectl kovn gather: %d files in %s", len(files), filepath.Base(res.Path))
	})
}

func failedChecks(checks []kovnctl.Check) []kovnctl.Check {
	var out []kovnctl.Check
	for _, c := range checks {
		if !c.OK {
			out = append(out, c)
		}
	}
	return out
}

// bundleFiles reads a gathered tar.gz: each file's content by name.
func bundleFiles(t *testing.T, path string) map[string]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(zr)
	out := map[string]string{}
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(tr)
		out[h.Name] = string(b)
	}
}
