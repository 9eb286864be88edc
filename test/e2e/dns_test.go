package e2e

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/kovn/kovn/test/rig"
)

// TestDNS: the rig's cluster DNS (CoreDNS from test/images/coredns behind the kube-dns Service,
// which kovn serves like any Service) answers pods for cluster.local over UDP and TCP, in
// every family of a dual-stack rig.
func TestDNS(t *testing.T) { concurrent(t); dnsSuite(t, rig.Dual) }

// TestDNSIPv6Only runs the same lookups on an IPv6-only rig: kube-dns, the apiserver's
// ClusterIP that CoreDNS reads the API through and the pods have no IPv4.
func TestDNSIPv6Only(t *testing.T) { concurrent(t); dnsSuite(t, rig.IPv6) }

// dnsRecord is one family's address record type.
type dnsRecord struct {
	qtype string
	v6    bool
}

func dnsSuite(t *testing.T, family string) {
	cfg := rigConfig(t, 1, 2)
	cfg.Kovn, cfg.IPFamily = true, family
	r := upRig(t, cfg)
	upAt := time.Now()
	c := newCluster(t, r, "c1")
	var records []dnsRecord
	if cfg.HasIPv4() {
		records = append(records, dnsRecord{"A", false})
	}
	if cfg.HasIPv6() {
		records = append(records, dnsRecord{"AAAA", true})
	}

	// Nothing in the test deploys DNS: `rig up` did.
	dep := c.waitDNSAvailable(2 * time.Minute)
	t.Logf("DNS Deployment %d/%d available %.1fs after rig up returned; kube-dns ClusterIPs %v",
		dep.Status.AvailableReplicas, *dep.Spec.Replicas, time.Since(upAt).Seconds(), cfg.ClusterDNSIPs(1))

	c.createNamespace("dns")
	// web1 and web2 are ready backends of Service web and headless Service hl; web1 also has
	// hostname+subdomain, so it gets a record of its own under hl. web3 never turns ready.
	web1 := dnsBackend("web1", "c1-n1", 8080)
	web1.Spec.Hostname, web1.Spec.Subdomain = "web1", "hl"
	c.createPod(web1)
	c.createPod(dnsBackend("web2", "c1-n2", 8080))
	c.createPod(dnsBackend("web3", "c1-n2", 8099)) // probes a port nothing serves
	c.createPod(testboxPod("dns", "client", onNode("c1-n1")))
	pods := map[string]*corev1.Pod{}
	for _, p := range []string{"web1", "web2", "client"} {
		pods[p] = c.waitReady("dns", p, 90*time.Second)
	}
	c.waitRunning("dns", "web3", 90*time.Second)
	web := c.createDNSService(dnsServiceSpec("web", false))
	c.createDNSService(dnsServiceSpec("hl", true))
	ext := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "dns", Name: "ext"},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: "www.example.org"}}
	c.createDNSService(ext)
	t.Logf("Service web %v; pods web1 %v, web2 %v", web, pods["web1"].Status.PodIPs, pods["web2"].Status.PodIPs)

	for _, tcp := range []bool{false, true} {
		proto := map[bool]string{false: "UDP", true: "TCP"}[tcp]
		t.Run(proto+": ClusterIP Service by short name (search path), name.namespace and full name", func(t *testing.T) {
			c.t = t
			for _, rec := range records {
				want := ofFamily(web, rec.v6)
				for _, name := range []string{"web", "web.dns", "web.dns.svc.cluster.local."} {
					out := c.waitLookup(tcp, name, rec.qtype, want, 30*time.Second)
					if name == "web" && !strings.Contains(firstLine(out), "reply web.dns.svc.cluster.local. "+rec.qtype+" Success") {
						t.Fatalf("%s %s: the search path's first name (the pod's namespace) did not answer:\n%s", name, rec.qtype, out)
					}
				}
			}
			out := c.waitLookup(tcp, "web.dns.svc.cluster.local.", records[0].qtype, ofFamily(web, records[0].v6), 10*time.Second)
			t.Logf("one %s lookup of web.dns.svc.cluster.local. (%s): %s", records[0].qtype, proto, lastLine(out))
		})
		t.Run(proto+": headless Service: one record per ready pod, the unready one left out", func(t *testing.T) {
			c.t = t
			c.waitUnreadyEndpoint("hl", "web3")
			for _, rec := range records {
				want := append(ofFamily(podIPs(pods["web1"]), rec.v6), ofFamily(podIPs(pods["web2"]), rec.v6)...)
				c.waitLookup(tcp, "hl", rec.qtype, want, 30*time.Second)
			}
		})
		t.Run(proto+": pod hostname.subdomain under its headless Service", func(t *testing.T) {
			c.t = t
			for _, rec := range records {
				c.waitLookup(tcp, "web1.hl", rec.qtype, ofFamily(podIPs(pods["web1"]), rec.v6), 30*time.Second)
			}
		})
		t.Run(proto+": ExternalName Service is a CNAME to its target", func(t *testing.T) {
			c.t = t
			c.waitLookup(tcp, "ext", "CNAME", []string{"www.example.org."}, 30*time.Second)
		})
		t.Run(proto+": a name that does not exist is NXDOMAIN", func(t *testing.T) {
			c.t = t
			out, err := c.lookup(tcp, "nope.dns.svc.cluster.local.", records[0].qtype)
			if err == nil || !strings.Contains(out, "reply nope.dns.svc.cluster.local. "+records[0].qtype+" NameError") ||
				!strings.Contains(out, "NOTFOUND") {
				t.Fatalf("nope.dns.svc.cluster.local.: want NXDOMAIN, got %v:\n%s", err, out)
			}
			// Every cluster.local name the search path makes of a short name is NXDOMAIN too.
			out, _ = c.lookup(tcp, "nope", records[0].qtype)
			for _, l := range strings.Split(out, "\n") {
				if strings.HasPrefix(l, "reply ") && strings.Contains(l, "cluster.local.") && !strings.Contains(l, " NameError ") {
					t.Fatalf("nope: %q is not NXDOMAIN:\n%s", l, out)
				}
			}
		})
	}
	t.Run("kube-dns answers on each of its ClusterIPs", func(t *testing.T) {
		c.t = t
		for _, ip := range cfg.ClusterDNSIPs(1) {
			for _, tcp := range []bool{false, true} {
				out, err := c.lookup(tcp, "web.dns.svc.cluster.local.", records[0].qtype, "-server", hostPort(ip, 53))
				if got := dnsAnswers(out, records[0].qtype); err != nil || !equalSets(got, ofFamily(web, records[0].v6)) {
					t.Fatalf("via %s (tcp=%t): %v %v\n%s", ip, tcp, got, err, out)
				}
			}
		}
	})
	t.Run("DNS down (no replicas): lookups fail; back up: they answer again", func(t *testing.T) {
		c.t = t
		c.scaleDNS(0)
		out, err := c.lookup(false, "web.dns.svc.cluster.local.", records[0].qtype)
		if err == nil {
			t.Fatalf("lookup with no DNS server answered:\n%s", out)
		}
		t.Logf("no DNS pods: %s", strings.TrimSpace(out))
		scaled := time.Now()
		c.scaleDNS(rig.DNSReplicas)
		c.waitLookup(false, "web.dns.svc.cluster.local.", records[0].qtype, ofFamily(web, records[0].v6), 2*time.Minute)
		t.Logf("scaled back to %d: answering %.1fs later", rig.DNSReplicas, time.Since(scaled).Seconds())
		c.waitDNSAvailable(time.Minute)
	})
}

// waitUnreadyEndpoint waits until Service svc's EndpointSlices list pod as an endpoint that
// is not ready: DNS must leave it out, not merely never hear of it.
func (c *cluster) waitUnreadyEndpoint(svc, pod string) {
	c.t.Helper()
	err := eventually(30*time.Second, func() error {
		sl, err := c.kc.DiscoveryV1().EndpointSlices("dns").List(context.Background(), metav1.ListOptions{LabelSelector: "kubernetes.io/service-name=" + svc})
		if err != nil {
			return err
		}
		for _, s := range sl.Items {
			for _, e := range s.Endpoints {
				if e.TargetRef != nil && e.TargetRef.Name == pod && e.Conditions.Ready != nil && !*e.Conditions.Ready {
					return nil
				}
			}
		}
		return fmt.Errorf("no not-ready endpoint %s in Service %s's slices", pod, svc)
	})
	if err != nil {
		c.t.Fatal(err)
	}
}

// dnsBackend is a testbox pod in namespace dns labelled app=web whose readiness probe asks
// port probePort (testbox serves 8080).
func dnsBackend(name, node string, probePort int32) *corev1.Pod {
	p := testboxPod("dns", name, onNode(node))
	p.Labels["app"] = "web"
	p.Spec.Containers[0].ReadinessProbe = &corev1.Probe{PeriodSeconds: 1, FailureThreshold: 1,
		ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromInt32(probePort)}}}
	return p
}

// dnsServiceSpec is a Service in every family the cluster has, selecting app=web.
func dnsServiceSpec(name string, headless bool) *corev1.Service {
	dual := corev1.IPFamilyPolicyPreferDualStack
	s := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "dns", Name: name}, Spec: corev1.ServiceSpec{
		Selector: map[string]string{"app": "web"}, IPFamilyPolicy: &dual,
		Ports: []corev1.ServicePort{{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80, TargetPort: intstr.FromInt32(8080)}}}}
	if headless {
		s.Spec.ClusterIP = corev1.ClusterIPNone
	}
	return s
}

func (c *cluster) createDNSService(s *corev1.Service) []string {
	c.t.Helper()
	got, err := c.kc.CoreV1().Services(s.Namespace).Create(context.Background(), s, metav1.CreateOptions{})
	if err != nil {
		c.t.Fatalf("create Service %s: %v", s.Name, err)
	}
	return got.Spec.ClusterIPs
}

// lookup runs `testbox dns` in the client pod.
func (c *cluster) lookup(tcp bool, name, qtype string, flags ...string) (string, error) {
	args := append([]string{"dns", "-W", "3s"}, flags...)
	if tcp {
		args = append(args, "-tcp")
	}
	return c.exec("dns", "client", append(args, name, qtype)...)
}

// waitLookup repeats a lookup until its records are exactly want and returns its output.
func (c *cluster) waitLookup(tcp bool, name, qtype string, want []string, timeout time.Duration) string {
	c.t.Helper()
	if len(want) == 0 {
		c.t.Fatalf("%s %s: nothing to expect", name, qtype)
	}
	var out string
	err := eventually(timeout, func() error {
		var err error
		out, err = c.lookup(tcp, name, qtype)
		if got := dnsAnswers(out, qtype); err != nil || !equalSets(got, want) {
			return fmt.Errorf("got %v (%v), want %v", got, err, want)
		}
		return nil
	})
	if err != nil {
		c.t.Fatalf("lookup %s %s (tcp=%t): %v\n%s", name, qtype, tcp, err, out)
	}
	return out
}

// dnsAnswers picks the records of one type from testbox dns output ("A 10.96.0.1").
func dnsAnswers(out, qtype string) []string {
	var got []string
	for _, l := range strings.Split(out, "\n") {
		if f := strings.Fields(l); len(f) == 2 && f[0] == qtype {
			got = append(got, f[1])
		}
	}
	sort.Strings(got)
	return got
}

func ofFamily(ips []string, v6 bool) []string {
	var out []string
	for _, s := range ips {
		if a, err := netip.ParseAddr(s); err == nil && a.Is6() == v6 {
			out = append(out, a.String())
		}
	}
	return out
}

func podIPs(p *corev1.Pod) []string {
	var out []string
	for _, ip := range p.Status.PodIPs {
		out = append(out, ip.IP)
	}
	return out
}

func firstLine(s string) string { return strings.SplitN(strings.TrimSpace(s), "\n", 2)[0] }
func lastLine(s string) string {
	ls := strings.Split(strings.TrimSpace(s), "\n")
	return ls[len(ls)-1]
}

// waitDNSAvailable waits until every replica of the DNS Deployment is available.
func (c *cluster) waitDNSAvailable(timeout time.Duration) *appsv1.Deployment {
	c.t.Helper()
	var d *appsv1.Deployment
	err := eventually(timeout, func() error {
		var err error
		if d, err = c.kc.AppsV1().Deployments(rig.DNSNamespace).Get(context.Background(), rig.DNSDeployment, metav1.GetOptions{}); err != nil {
			return err
		}
		if d.Spec.Replicas == nil || d.Status.AvailableReplicas != *d.Spec.Replicas || d.Status.UpdatedReplicas != *d.Spec.Replicas {
			return fmt.Errorf("%d of %v replicas available", d.Status.AvailableReplicas, d.Spec.Replicas)
		}
		return nil
	})
	if err != nil {
		out, _ := c.kubectl("get", "pods", "-n", rig.DNSNamespace, "-l", "k8s-app="+rig.DNSAppLabel, "-o", "wide")
		c.t.Fatalf("DNS Deployment %s/%s: %v\n%s", rig.DNSNamespace, rig.DNSDeployment, err, out)
	}
	return d
}

// scaleDNS sets the DNS Deployment's replicas and, for 0, waits until no DNS pod is left.
func (c *cluster) scaleDNS(n int) {
	c.t.Helper()
	if out, err := c.kubectl("scale", "deployment", "-n", rig.DNSNamespace, rig.DNSDeployment, fmt.Sprintf("--replicas=%d", n)); err != nil {
		c.t.Fatalf("scale DNS to %d: %v %s", n, err, out)
	}
	if n > 0 {
		return
	}
	err := eventually(time.Minute, func() error {
		pods, err := c.kc.CoreV1().Pods(rig.DNSNamespace).List(context.Background(), metav1.ListOptions{LabelSelector: "k8s-app=" + rig.DNSAppLabel})
		if err != nil {
			return err
		}
		if names := podNames(pods.Items); len(names) > 0 {
			return fmt.Errorf("DNS pods left: %v", names)
		}
		return nil
	})
	if err != nil {
		c.t.Fatal(err)
	}
}

func podNames(ps []corev1.Pod) []string {
	var out []string
	for _, p := range ps {
		out = append(out, p.Name)
	}
	return slices.Sorted(slices.Values(out))
}
