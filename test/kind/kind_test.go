// Package kind checks what can be checked here of the kind setup (no Docker on these machines):
// the cluster configs against kind's own config types, the chart rendered with each cluster's
// values as up.sh passes them, and the scripts with shellcheck.
package kind

import (
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	kindv1 "sigs.k8s.io/kind/pkg/apis/config/v1alpha4"
	"sigs.k8s.io/yaml"

	"github.com/kovn/kovn/deploy"
)

const clusters = 3

func loadCluster(t *testing.T, i int) kindv1.Cluster {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("cluster-c%d.yaml", i))
	if err != nil {
		t.Fatal(err)
	}
	var c kindv1.Cluster
	if err := yaml.UnmarshalStrict(b, &c); err != nil {
		t.Fatalf("cluster-c%d.yaml is not a kind config: %v", i, err)
	}
	return c
}

func TestClusterConfigs(t *testing.T) {
	var ranges []netip.Prefix
	for i := 1; i <= clusters; i++ {
		c := loadCluster(t, i)
		if c.Kind != "Cluster" || c.APIVersion != "kind.x-k8s.io/v1alpha4" || c.Name != fmt.Sprintf("kovn-c%d", i) {
			t.Errorf("cluster-c%d.yaml: %s %s %s", i, c.APIVersion, c.Kind, c.Name)
		}
		if !c.Networking.DisableDefaultCNI || c.Networking.KubeProxyMode != "none" {
			t.Errorf("cluster-c%d.yaml: kovn is the CNI and serves Services: disableDefaultCNI %v, kubeProxyMode %q",
				i, c.Networking.DisableDefaultCNI, c.Networking.KubeProxyMode)
		}
		// up.sh labels the control plane for OVN central and the first worker as the gateway
		// (role labels a kubelet cannot set: kind's node labels go through the kubelet).
		if len(c.Nodes) < 2 || c.Nodes[0].Role != kindv1.ControlPlaneRole || c.Nodes[1].Role != kindv1.WorkerRole {
			t.Errorf("cluster-c%d.yaml: needs a control-plane node (OVN central) and a worker (the gateway) first", i)
		}
		for _, n := range c.Nodes {
			if len(n.Labels) > 0 {
				t.Errorf("cluster-c%d.yaml: node labels %v: kovn's role labels are set by up.sh", i, n.Labels)
			}
		}
		for _, s := range []string{c.Networking.PodSubnet, c.Networking.ServiceSubnet} {
			p, err := netip.ParsePrefix(s)
			if err != nil {
				t.Fatalf("cluster-c%d.yaml: %v", i, err)
			}
			for _, q := range ranges {
				if p.Overlaps(q) {
					t.Errorf("cluster-c%d.yaml: %s overlaps %s of another cluster or its own", i, p, q)
				}
			}
			ranges = append(ranges, p)
		}
	}
}

func helm(t *testing.T) string {
	t.Helper()
	p, err := filepath.Abs("../../_output/bin/helm")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("helm is missing (%v): `make helm` builds it from its Go module", err)
	}
	return p
}

// upSets are the values up.sh adds once the clusters exist (the addresses are examples).
func upSets(i int) []string {
	ip := fmt.Sprintf("172.18.0.%d", 10*i)
	return []string{"ovnCentral.addresses={" + ip + "}", "apiServer.host=" + ip,
		"interconnect.icNorthbound={tcp:172.18.0.10:6645}", "interconnect.icSouthbound={tcp:172.18.0.10:6646}",
		"interconnect.insecurePlainTCP=true"}
}

// Each cluster's values, as up.sh passes them, render a chart whose CIDRs are kind's.
func TestValuesMatchTheClusters(t *testing.T) {
	azs := map[string]bool{}
	for i := 1; i <= clusters; i++ {
		c := loadCluster(t, i)
		objs, err := deploy.Render(helm(t), []string{fmt.Sprintf("values-c%d.yaml", i)}, upSets(i)...)
		if err != nil {
			t.Fatalf("values-c%d.yaml: %v", i, err)
		}
		var ctrl, ic, central *unstructured.Unstructured
		for _, o := range objs {
			switch o.GetKind() + "/" + o.GetName() {
			case "Deployment/kovn-controller":
				ctrl = o
			case "InterConnect/default":
				ic = o
			case "DaemonSet/kovn-ovn-central":
				central = o
			}
		}
		if ctrl == nil || ic == nil || central == nil {
			t.Fatalf("values-c%d.yaml: controller, InterConnect or OVN central not rendered", i)
		}
		containers, _, _ := unstructured.NestedSlice(ctrl.Object, "spec", "template", "spec", "containers")
		cmd, _, _ := unstructured.NestedStringSlice(containers[0].(map[string]any), "command")
		if !slices.Contains(cmd, "--default-cidr="+c.Networking.PodSubnet) {
			t.Errorf("values-c%d.yaml: kovn-controller %v, kind's pod subnet %s", i, cmd, c.Networking.PodSubnet)
		}
		vals, err := os.ReadFile(fmt.Sprintf("values-c%d.yaml", i))
		if err != nil {
			t.Fatal(err)
		}
		var v struct {
			Cluster struct{ ServiceCIDR string } `json:"cluster"`
		}
		if err := yaml.Unmarshal(vals, &v); err != nil || v.Cluster.ServiceCIDR != c.Networking.ServiceSubnet {
			t.Errorf("values-c%d.yaml: serviceCIDR %q, kind's %q (%v)", i, v.Cluster.ServiceCIDR, c.Networking.ServiceSubnet, err)
		}
		az, _, _ := unstructured.NestedString(ic.Object, "spec", "azName")
		if azs[az] {
			t.Errorf("values-c%d.yaml: AZ %s used twice", i, az)
		}
		azs[az] = true
		names := map[string]bool{}
		cs, _, _ := unstructured.NestedSlice(central.Object, "spec", "template", "spec", "containers")
		for _, c := range cs {
			names[c.(map[string]any)["name"].(string)] = true
		}
		if names["ic-nb"] != (i == 1) {
			t.Errorf("values-c%d.yaml: IC databases served: %v (only c1 serves them, up.sh points every cluster there)", i, names["ic-nb"])
		}
	}
}

func TestScriptsPassShellcheck(t *testing.T) {
	sc, err := exec.LookPath("shellcheck")
	if err != nil {
		t.Fatal("shellcheck is missing: hack/install-deps.sh installs it (Debian package shellcheck)")
	}
	if out, err := exec.Command(sc, "up.sh", "down.sh").CombinedOutput(); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
}
