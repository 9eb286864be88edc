package deploy

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	kovnv1 "github.com/kovn/kovn/api/v1alpha1"
)

// The chart is rendered by the real helm (built from its Go module by `make helm`) so that
// what is tested is what `helm install` does.

// kubeVersion is what helm renders for: the rig's Kubernetes.
const kubeVersion = KubeVersion

func helmBin(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("KOVN_HELM"); p != "" {
		return p
	}
	p, err := filepath.Abs("../_output/bin/helm")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("helm is missing (%v): `make helm` builds it from its Go module", err)
	}
	return p
}

// sampleValues is a 3-node dual-stack cluster joined to a clusterset, with BGP.
var sampleValues = []string{
	"ovnCentral.addresses={172.30.1.11,172.30.1.12,172.30.1.13}",
	"cluster.podCIDR=10.16.0.0/16\\,fd00:10:16::/64",
	"cluster.serviceCIDR=10.96.0.0/16\\,fd00:10:96::/108",
	"interconnect.enabled=true", "interconnect.azName=az1",
	"interconnect.icNorthbound={ssl:172.30.0.100:6645}", "interconnect.icSouthbound={ssl:172.30.0.100:6646}",
	"interconnect.gatewayNodes={c1-n1,c1-n2}", "speaker.enabled=true",
}

func helm(t *testing.T, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(helmBin(t), args...)
	var out, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &stderr
	if err := cmd.Run(); err != nil {
		return out.String(), fmt.Errorf("helm %s: %w: %s", strings.Join(args, " "), err, stderr.String())
	}
	return out.String(), nil
}

func render(t *testing.T, namespace string, set ...string) ([]*unstructured.Unstructured, string, error) {
	t.Helper()
	args := []string{"template", "kovn", ".", "--namespace", namespace, "--kube-version", kubeVersion}
	for _, s := range set {
		args = append(args, "--set", s)
	}
	out, err := helm(t, args...)
	if err != nil {
		return nil, "", err
	}
	objs, err := Decode([]byte(out))
	if err != nil {
		t.Fatalf("rendered chart is not YAML: %v", err)
	}
	return objs, out, nil
}

func mustRender(t *testing.T, set ...string) []*unstructured.Unstructured {
	t.Helper()
	objs, _, err := render(t, "kube-system", set...)
	if err != nil {
		t.Fatal(err)
	}
	return objs
}

func find(t *testing.T, objs []*unstructured.Unstructured, kind, name string) *unstructured.Unstructured {
	t.Helper()
	for _, o := range objs {
		if o.GetKind() == kind && o.GetName() == name {
			return o
		}
	}
	return nil
}

// strict converts u into out, refusing fields the type does not have (a misspelt key in a
// template would otherwise be dropped silently by the apiserver).
func strict(t *testing.T, u *unstructured.Unstructured, out any) {
	t.Helper()
	b, err := u.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.UnmarshalStrict(b, out); err != nil {
		t.Fatalf("%s %s: %v", u.GetKind(), u.GetName(), err)
	}
}

func TestChartLint(t *testing.T) {
	args := []string{"lint", ".", "--strict", "--namespace", "kube-system", "--kube-version", kubeVersion}
	for _, s := range sampleValues {
		args = append(args, "--set", s)
	}
	if out, err := helm(t, args...); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
}

func TestChartRendersEveryComponent(t *testing.T) {
	objs := mustRender(t, sampleValues...)
	want := map[string][]string{
		"Deployment":     {"kovn-controller"},
		"DaemonSet":      {"kovn-ovn-central", "kovn-ovs", "kovn-daemon", "kovn-speaker", "kovn-pinger"},
		"ConfigMap":      {"kovn-ovn-central", "kovn-ovs"},
		"ServiceAccount": {"kovn-controller", "kovn-daemon", "kovn-speaker", "kovn-pinger"},
		"InterConnect":   {"default"},
	}
	for kind, names := range want {
		for _, n := range names {
			if find(t, objs, kind, n) == nil {
				t.Errorf("%s %s not rendered", kind, n)
			}
		}
	}
	for _, o := range objs {
		switch o.GetKind() {
		case "Deployment":
			var d appsv1.Deployment
			strict(t, o, &d)
			checkPodSpec(t, o.GetName(), &d.Spec.Template.Spec)
		case "DaemonSet":
			var d appsv1.DaemonSet
			strict(t, o, &d)
			checkPodSpec(t, o.GetName(), &d.Spec.Template.Spec)
		case "ConfigMap":
			var c corev1.ConfigMap
			strict(t, o, &c)
		case "InterConnect":
			var ic kovnv1.InterConnect
			strict(t, o, &ic)
			if ic.Spec.AZName != "az1" || !slices.Equal(ic.Spec.GatewayNodes, []string{"c1-n1", "c1-n2"}) ||
				!slices.Equal(ic.Spec.ICNorthbound, []string{"ssl:172.30.0.100:6645"}) || ic.Spec.Mode != kovnv1.GatewayActiveStandby ||
				ic.Spec.TLSSecretName != "kovn-clusterset-tls" || ic.Spec.InsecurePlainTCP {
				t.Errorf("InterConnect from values: %+v", ic.Spec)
			}
		}
		// Everything in kube-system, but the speaker's right to read the BGP password Secrets,
		// which live in a namespace of their own.
		if ns := o.GetNamespace(); ns != "" && ns != "kube-system" && (ns != "kovn-bgp" || o.GetName() != "kovn-speaker") {
			t.Errorf("%s %s in namespace %s", o.GetKind(), o.GetName(), ns)
		}
	}
}

// checkPodSpec: every image is kovn's, and every long-running kovn container has liveness and
// readiness probes on its health port, never on its metrics port.
func checkPodSpec(t *testing.T, name string, spec *corev1.PodSpec) {
	t.Helper()
	for _, c := range append(slices.Clone(spec.InitContainers), spec.Containers...) {
		if c.Image != "kovn.io/kovn:dev" {
			t.Errorf("%s/%s: image %q", name, c.Name, c.Image)
		}
	}
	for _, c := range spec.Containers {
		// A starved node answers slowly: the kubelet must not take that for a hang (an exec
		// probe runs through the container runtime, so it gets longer still).
		if p := c.LivenessProbe; p != nil && (p.TimeoutSeconds < 5 || p.Exec != nil && p.TimeoutSeconds < 15 || p.FailureThreshold < 6) {
			t.Errorf("%s/%s: liveness probe timeout %d s, %d misses: a busy node restarts it", name, c.Name, p.TimeoutSeconds, p.FailureThreshold)
		}
		if !strings.HasPrefix(c.Command[0], "/kovn-") {
			continue
		}
		if c.Command[0] == "/kovn-ovsdb" { // the NB proxy: probed through its own socket
			if c.LivenessProbe == nil || c.LivenessProbe.Exec == nil {
				t.Errorf("%s/%s: needs a liveness probe through its socket", name, c.Name)
			}
			continue
		}
		if c.LivenessProbe == nil || c.ReadinessProbe == nil || c.LivenessProbe.HTTPGet == nil || c.ReadinessProbe.HTTPGet == nil {
			t.Errorf("%s/%s: needs HTTP liveness and readiness probes", name, c.Name)
			continue
		}
		if c.LivenessProbe.HTTPGet.Path != "/livez" || c.ReadinessProbe.HTTPGet.Path != "/readyz" {
			t.Errorf("%s/%s: probes on %s and %s", name, c.Name, c.LivenessProbe.HTTPGet.Path, c.ReadinessProbe.HTTPGet.Path)
		}
		health := fmt.Sprintf("--health-probe-bind-address=:%d", c.LivenessProbe.HTTPGet.Port.IntValue())
		if !slices.Contains(c.Command, health) {
			t.Errorf("%s/%s: probe port %d is not its health address (%v)", name, c.Name, c.LivenessProbe.HTTPGet.Port.IntValue(), c.Command)
		}
		metrics := fmt.Sprintf("--metrics-bind-address=:%d", c.LivenessProbe.HTTPGet.Port.IntValue())
		if slices.Contains(c.Command, metrics) {
			t.Errorf("%s/%s: probes on the metrics port", name, c.Name)
		}
	}
}

// The chart's ClusterRoles, Role and admission policies are the generated files, unchanged.
func TestChartRBACIsTheGeneratedRBAC(t *testing.T) {
	objs := mustRender(t, sampleValues...)
	policies, err := filepath.Glob("policy/*.yaml") // every policy: a new file must be in the chart too
	if err != nil || len(policies) == 0 {
		t.Fatalf("policy/*.yaml: %v %v", policies, err)
	}
	for _, f := range append([]string{"rbac/controller/role.yaml", "rbac/daemon/role.yaml", "rbac/speaker/role.yaml", "rbac/pinger/role.yaml"}, policies...) {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(b), 4096)
		for {
			u := &unstructured.Unstructured{}
			if err := dec.Decode(&u.Object); errors.Is(err, io.EOF) {
				break
			} else if err != nil {
				t.Fatal(err)
			}
			if len(u.Object) == 0 {
				continue
			}
			got := find(t, objs, u.GetKind(), u.GetName())
			if got == nil {
				t.Errorf("%s: %s %s not in the chart", f, u.GetKind(), u.GetName())
			} else if !reflect.DeepEqual(got.Object, u.Object) {
				t.Errorf("%s: %s %s differs in the chart", f, u.GetKind(), u.GetName())
			}
		}
	}
	for _, name := range []string{"kovn-controller", "kovn-daemon", "kovn-speaker"} {
		b := find(t, objs, "ClusterRoleBinding", name)
		if b == nil {
			t.Errorf("ClusterRoleBinding %s missing", name)
			continue
		}
		var crb rbacv1.ClusterRoleBinding
		strict(t, b, &crb)
		if crb.RoleRef.Name != name || len(crb.Subjects) != 1 || crb.Subjects[0].Name != name || crb.Subjects[0].Namespace != "kube-system" {
			t.Errorf("ClusterRoleBinding %s: %+v %+v", name, crb.RoleRef, crb.Subjects)
		}
	}
	// The speaker's identity exists only where it runs.
	if objs := mustRender(t, sampleValues[0]); find(t, objs, "ServiceAccount", "kovn-speaker") != nil || find(t, objs, "DaemonSet", "kovn-speaker") != nil {
		t.Error("speaker rendered with speaker.enabled=false")
	}
}

func args(t *testing.T, objs []*unstructured.Unstructured, kind, name, container string) ([]string, map[string]string) {
	t.Helper()
	o := find(t, objs, kind, name)
	if o == nil {
		t.Fatalf("%s %s not rendered", kind, name)
	}
	var spec corev1.PodSpec
	b, _, _ := unstructured.NestedMap(o.Object, "spec", "template", "spec")
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(b, &spec); err != nil {
		t.Fatal(err)
	}
	for _, c := range spec.Containers {
		if c.Name == container {
			env := map[string]string{}
			for _, e := range c.Env {
				env[e.Name] = e.Value
			}
			return c.Command, env
		}
	}
	t.Fatalf("%s %s has no container %s", kind, name, container)
	return nil, nil
}

func TestChartValuesReachTheComponents(t *testing.T) {
	objs := mustRender(t, append(slices.Clone(sampleValues), "ovs.datapath=netdev", "cluster.mtu=1300",
		"ovnCentral.addresses={172.30.1.11,fd00:30::1:11}")...)
	ctrl, _ := args(t, objs, "Deployment", "kovn-controller", "controller")
	for _, a := range []string{"--default-cidr=10.16.0.0/16,fd00:10:16::/64", "--join-cidr=100.64.0.0/16",
		"--ovn-nb-addr=ssl:172.30.1.11:6641,ssl:[fd00:30::1:11]:6641", "--ovn-sb-addr=ssl:172.30.1.11:6642,ssl:[fd00:30::1:11]:6642",
		"--ovn-pki", "--ovn-central-addresses=172.30.1.11,fd00:30::1:11"} {
		if !slices.Contains(ctrl, a) {
			t.Errorf("kovn-controller lacks %s: %v", a, ctrl)
		}
	}
	daemon, _ := args(t, objs, "DaemonSet", "kovn-daemon", "daemon")
	for _, a := range []string{"--netdev", "--mtu=1300", "--service-cidrs=10.96.0.0/16,fd00:10:96::/108",
		"--ovn-remote=ssl:172.30.1.11:6642,ssl:[fd00:30::1:11]:6642", "--ovn-chassis-tls-dir=/var/run/ovn/kovn-chassis-tls"} {
		if !slices.Contains(daemon, a) {
			t.Errorf("kovn-daemon lacks %s: %v", a, daemon)
		}
	}
	_, env := args(t, objs, "DaemonSet", "kovn-ovs", "vswitchd")
	if env["DATAPATH"] != "netdev" || env["OVN_SB_DB"] != "ssl:172.30.1.11:6642,ssl:[fd00:30::1:11]:6642" {
		t.Errorf("kovn-ovs env: %v", env)
	}
	// OVN central on mutual TLS: NB trusts the central CA alone, SB both CAs; northd and ovn-ic
	// reach SB through its unix socket (its network listener carries a chassis's role), ovn-ic
	// reaches NB through kovn-ovsdb's proxy (its one certificate is the AZ's).
	for db, ca := range map[string]string{"nb": "/etc/kovn/ovn-tls/ca.crt", "sb": "/etc/kovn/ovn-tls/sb-ca.crt"} {
		if cmd, _ := args(t, objs, "DaemonSet", "kovn-ovn-central", db); cmd[len(cmd)-1] != ca {
			t.Errorf("%s: %v, want clients chained to %s", db, cmd, ca)
		}
	}
	northd, _ := args(t, objs, "DaemonSet", "kovn-ovn-central", "northd")
	for _, a := range []string{"--ovnnb-db=ssl:172.30.1.11:6641,ssl:[fd00:30::1:11]:6641", "--ovnsb-db=unix:/var/run/ovn/ovnsb_db.sock",
		"--certificate=/etc/kovn/ovn-tls/tls.crt", "--ca-cert=/etc/kovn/ovn-tls/ca.crt"} {
		if !slices.Contains(northd, a) {
			t.Errorf("ovn-northd lacks %s: %v", a, northd)
		}
	}
	proxy, _ := args(t, objs, "DaemonSet", "kovn-ovn-central", "nb-proxy")
	if !slices.Contains(proxy, "ssl:172.30.1.11:6641,ssl:[fd00:30::1:11]:6641") || !slices.Contains(proxy, "/var/run/ovn/ovnnb_ic.sock") {
		t.Errorf("nb-proxy: %v", proxy)
	}
	ic, _ := args(t, objs, "DaemonSet", "kovn-ovn-central", "ovn-ic")
	for _, a := range []string{"--ic-nb-db=ssl:172.30.0.100:6645", "--certificate=/etc/kovn/clusterset-tls/tls.crt",
		"--ovnnb-db=unix:/var/run/ovn/ovnnb_ic.sock", "--ovnsb-db=unix:/var/run/ovn/ovnsb_db.sock"} {
		if !slices.Contains(ic, a) {
			t.Errorf("ovn-ic lacks %s: %v", a, ic)
		}
	}
	// INSECURE plain TCP: no PKI, no chassis certificates, tcp endpoints everywhere.
	plain := mustRender(t, append(slices.Clone(sampleValues), "ovnCentral.addresses={172.30.1.11}", "ovnCentral.insecurePlainTCP=true")...)
	if ctrl, _ := args(t, plain, "Deployment", "kovn-controller", "controller"); slices.Contains(ctrl, "--ovn-pki") ||
		!slices.Contains(ctrl, "--ovn-nb-addr=tcp:172.30.1.11:6641") {
		t.Errorf("insecure kovn-controller: %v", ctrl)
	}
	if daemon, _ := args(t, plain, "DaemonSet", "kovn-daemon", "daemon"); slices.Contains(daemon, "--ovn-chassis-tls-dir=/var/run/ovn/kovn-chassis-tls") {
		t.Errorf("insecure kovn-daemon asks for a chassis certificate: %v", daemon)
	}
	if sb, _ := args(t, plain, "DaemonSet", "kovn-ovn-central", "sb"); sb[len(sb)-1] != "none" {
		t.Errorf("insecure SB: %v", sb)
	}
	// The clusterset's IC databases: mutual TLS with their own certificate, chained to the
	// clusterset's CA; OVN_ClusterSet beside IC-SB; plain TCP only when asked for.
	objs = mustRender(t, sampleValues[0], "interconnect.databases.enabled=true")
	if nb, _ := args(t, objs, "DaemonSet", "kovn-ovn-central", "ic-nb"); !slices.Equal(nb[1:], []string{"/scripts/start-db.sh",
		"ovn_ic_nb_db", "/usr/share/ovn/ovn-ic-nb.ovsschema", "6645", "6647", "/etc/kovn/ic-db-tls/ca.crt"}) {
		t.Errorf("IC-NB: %v", nb)
	}
	if sb, _ := args(t, objs, "DaemonSet", "kovn-ovn-central", "ic-sb"); !slices.Equal(sb[1:], []string{"/scripts/start-db.sh",
		"ovn_ic_sb_db", "/usr/share/ovn/ovn-ic-sb.ovsschema", "6646", "6648", "/etc/kovn/ic-db-tls/ca.crt",
		"ovn_clusterset_db", "/scripts/ovn-clusterset.ovsschema", "6649"}) {
		t.Errorf("IC-SB: %v", sb)
	}
	if ds := find(t, objs, "DaemonSet", "kovn-ovn-central"); !strings.Contains(fmt.Sprint(ds.Object), "secretName:kovn-clusterset-db-tls") {
		t.Error("the IC databases' Secret kovn-clusterset-db-tls is not mounted")
	}
	if cm := find(t, objs, "ConfigMap", "kovn-ovn-central"); !strings.Contains(fmt.Sprint(cm.Object), `"name": "OVN_ClusterSet"`) {
		t.Error("the OVN_ClusterSet schema is not in the scripts' ConfigMap")
	}
	plainIC := mustRender(t, sampleValues[0], "interconnect.databases.enabled=true", "interconnect.insecurePlainTCP=true")
	if nb, _ := args(t, plainIC, "DaemonSet", "kovn-ovn-central", "ic-nb"); nb[len(nb)-1] != "none" {
		t.Errorf("insecure IC-NB: %v", nb)
	}
	// Without interconnect: no ovn-ic and no InterConnect object.
	objs = mustRender(t, sampleValues[0])
	if find(t, objs, "InterConnect", "default") != nil {
		t.Error("InterConnect rendered with interconnect.enabled=false")
	}
	if daemon, _ := args(t, objs, "DaemonSet", "kovn-daemon", "daemon"); slices.Contains(daemon, "--netdev") {
		t.Error("--netdev with the system datapath")
	}
	// Under Multus, kovn leaves the attachment networks alone: controller and daemon agree.
	for set, want := range map[string]string{"": "--attachment-networks=true", "attachmentNetworks=false": "--attachment-networks=false"} {
		objs = mustRender(t, append([]string{sampleValues[0]}, strings.Fields(set)...)...)
		ctrl, _ := args(t, objs, "Deployment", "kovn-controller", "controller")
		daemon, _ := args(t, objs, "DaemonSet", "kovn-daemon", "daemon")
		if !slices.Contains(ctrl, want) || !slices.Contains(daemon, want) {
			t.Errorf("%q: controller %v, daemon %v, want both %s", set, ctrl, daemon, want)
		}
	}
}

// Values that cannot work fail the install with a reason, before anything is created.
func TestChartRefusesBadValues(t *testing.T) {
	for _, tc := range []struct {
		ns   string
		set  []string
		want string
	}{
		{"default", []string{sampleValues[0]}, `install kovn into kube-system`},
		{"kube-system", nil, "ovnCentral.addresses: list the node IPs"},
		{"kube-system", []string{"ovnCentral.enabled=false"}, "set ovnCentral.nbEndpoints and ovnCentral.sbEndpoints"},
		{"kube-system", []string{sampleValues[0], "ovs.datapath=dpdk"}, `ovs.datapath is system or netdev, not "dpdk"`},
		{"kube-system", []string{sampleValues[0], "interconnect.enabled=true"}, "interconnect.azName"},
		{"kube-system", []string{"ovnCentral.enabled=false", "ovnCentral.nbEndpoints=tcp:1.1.1.1:6641", "ovnCentral.sbEndpoints=tcp:1.1.1.1:6642",
			"interconnect.databases.enabled=true"}, "interconnect.databases runs on the OVN central nodes"},
		{"kube-system", []string{sampleValues[0], "interconnect.enabled=true", "interconnect.azName=a",
			"interconnect.icNorthbound={ssl:1.1.1.1:6645}", "interconnect.icSouthbound={ssl:1.1.1.1:6646}"}, "name gatewayNodes or a gatewaySelector"},
		{"kube-system", []string{sampleValues[0], "interconnect.enabled=true", "interconnect.azName=a", "interconnect.gatewayNodes={n1}",
			"interconnect.icNorthbound={ssl:1.1.1.1:6645}", "interconnect.icSouthbound={tcp:1.1.1.1:6646}"},
			"interconnect: tcp:1.1.1.1:6646 is not ssl: (anyone reaching a tcp: IC database can rewrite the clusterset); set interconnect.insecurePlainTCP=true"},
	} {
		_, _, err := render(t, tc.ns, tc.set...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("values %v in %s: want an error naming %q, got %v", tc.set, tc.ns, tc.want, err)
		}
	}
}

// The shell scripts the chart runs in containers pass shellcheck (as POSIX sh: the image's
// /bin/sh is dash).
func TestChartScriptsPassShellcheck(t *testing.T) {
	sc, err := exec.LookPath("shellcheck")
	if err != nil {
		t.Fatal("shellcheck is missing: hack/install-deps.sh installs it (Debian package shellcheck)")
	}
	objs := mustRender(t, sampleValues...)
	n := 0
	for _, o := range objs {
		if o.GetKind() != "ConfigMap" {
			continue
		}
		var cm corev1.ConfigMap
		strict(t, o, &cm)
		for key, script := range cm.Data {
			if !strings.HasSuffix(key, ".sh") {
				continue
			}
			n++
			cmd := exec.Command(sc, "--shell=sh", "-")
			cmd.Stdin = strings.NewReader(script)
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Errorf("ConfigMap %s, %s: %v\n%s", cm.Name, key, err, out)
			}
		}
	}
	if n < 4 {
		t.Fatalf("only %d scripts found", n)
	}
}

// The embedded chart (what the rig installs) is the chart in this directory, file for file.
func TestEmbeddedChartIsThisChart(t *testing.T) {
	embedded, err := Render(helmBin(t), nil, sampleValues...)
	if err != nil {
		t.Fatal(err)
	}
	onDisk := mustRender(t, sampleValues...)
	if len(embedded) != len(onDisk) {
		t.Fatalf("embedded chart renders %d objects, the directory %d: is a new file missing from embed.go?", len(embedded), len(onDisk))
	}
	for i := range onDisk {
		if !reflect.DeepEqual(embedded[i].Object, onDisk[i].Object) {
			t.Errorf("%s %s differs between the embedded chart and the directory", onDisk[i].GetKind(), onDisk[i].GetName())
		}
	}
}

// helm uninstall's hook: the Job and its cleanup pod are valid objects, the Job stops every
// kovn workload but OVS (which the cleanup needs), and the cleanup pod mounts every hostPath
// kovn-daemon and OVN central write.
func TestChartUninstallHook(t *testing.T) {
	objs := mustRender(t, sampleValues...)
	job := find(t, objs, "Job", "kovn-uninstall")
	cm := find(t, objs, "ConfigMap", "kovn-uninstall")
	if job == nil || cm == nil {
		t.Fatal("the uninstall hook's Job or ConfigMap is not rendered")
	}
	if job.GetAnnotations()["helm.sh/hook"] != "pre-delete" {
		t.Errorf("Job annotations %v", job.GetAnnotations())
	}
	var j batchv1.Job
	strict(t, job, &j)
	var stop, first []string
	for _, a := range j.Spec.Template.Spec.Containers[0].Command {
		if v, ok := strings.CutPrefix(a, "--stop="); ok {
			stop = strings.Split(v, ",")
		}
		if v, ok := strings.CutPrefix(a, "--stop-first="); ok {
			first = strings.Split(v, ",")
		}
	}
	// kovn's workloads on its own pod network go first, while kovn-daemon still tears down
	// their sandboxes.
	if !slices.Equal(first, []string{"daemonset/kovn-pinger"}) {
		t.Errorf("the uninstall hook stops %v first, want daemonset/kovn-pinger", first)
	}
	stop = append(stop, first...)
	for _, o := range objs {
		kind := strings.ToLower(o.GetKind())
		if (kind == "deployment" || kind == "daemonset") && o.GetName() != "kovn-ovs" && !slices.Contains(stop, kind+"/"+o.GetName()) {
			t.Errorf("the uninstall hook does not stop %s/%s (it stops %v)", kind, o.GetName(), stop)
		}
	}
	var c corev1.ConfigMap
	strict(t, cm, &c)
	var pod corev1.Pod
	if err := yaml.UnmarshalStrict([]byte(c.Data["pod.yaml"]), &pod); err != nil {
		t.Fatalf("cleanup pod: %v", err)
	}
	paths := map[string]bool{}
	for _, v := range pod.Spec.Volumes {
		if v.HostPath != nil {
			paths[v.HostPath.Path] = true
		}
	}
	for _, want := range []string{"/var/run/openvswitch", "/var/run/ovn", "/run/kovn", "/etc/cni/net.d", "/opt/cni/bin", "/var/lib/kovn/ovn-central"} {
		if !paths[want] {
			t.Errorf("cleanup pod does not mount %s: %v", want, paths)
		}
	}
	if pod.Spec.Containers[0].TerminationMessagePolicy != corev1.TerminationMessageFallbackToLogsOnError {
		t.Error("the cleanup pod's log must reach the hook's error (FallbackToLogsOnError)")
	}
}
