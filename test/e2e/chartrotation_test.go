package e2e

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kovn/kovn/pkg/cluster/ovnpki"
	"github.com/kovn/kovn/pkg/pki"
	"github.com/kovn/kovn/test/rig"
)

// chartCARotation: both of the chart's OVN CAs (central and chassis) are replaced in kovn's
// three steps (cfg.ChartCARotationStep each) under a 100 ms stream from pod a on node 1 to pod
// b on node 2, NB and SB dropping every session every 2 s meanwhile: no probe lost, and no OVN
// daemon logged a failed TLS connection. Afterwards OVN central's certificate and every node's chassis
// certificate come from the new CAs, the bundles hold them alone, every ovn-controller
// acknowledges a new NB change (each reached SB on its new certificate), and NB and SB refuse
// certificates of the old CAs that they took before.
func chartCARotation(t *testing.T, c *cluster, cfg rig.Config, b *corev1.Pod) {
	c.t = t
	ctx := context.Background()
	secrets := c.kc.CoreV1().Secrets("kube-system")
	oldCentral, oldChassis := caOf(t, c, ovnpki.CentralCASecret), caOf(t, c, ovnpki.ChassisCASecret)
	ns, central := cfg.NodeNS(1, 1), cfg.NodeIPs(1, 1)[0].String()
	nb, sb := "ssl:"+hostPort(central, rig.PortNB), "ssl:"+hostPort(central, rig.PortSB)
	oldClient := identityFrom(t, c, ovnpki.CentralCASecret, "e2e-old-central")
	oldNode, err := chassisIdentity(cfg, 1, oldChassis)
	if err != nil {
		t.Fatal(err)
	}
	oldNode = keepIdentity(t, oldNode) // kovn-daemon removes the directory once it has a new one
	for what, id := range map[string]rig.OVSDBTLS{"NB": oldClient, "SB": oldNode} {
		ep := map[string]string{"NB": nb, "SB": sb}[what]
		if out, err := ovsdbAs(ns, id, "ovsdb-client", "list-dbs", ep); err != nil {
			t.Fatalf("%s refused a certificate of its CA before the rotation: %v %s", what, err, out)
		}
	}

	var steps []string
	start, drops := time.Now(), 0
	// Open sessions outlive a certificate change, so NB and SB drop every session every 2 s
	// while the CAs rotate: each client keeps reconnecting with what it holds at that moment,
	// which a one-step change (bundles without the other CA) fails in its propagation window.
	run := filepath.Join(cfg.NodeDir(1, 1), "host", "ovn-run")
	dropSessions := func() {
		for _, db := range []string{"ovnnb_db", "ovnsb_db"} {
			if out, err := exec.Command("ovs-appctl", "-t", filepath.Join(run, db+".ctl"), "ovsdb-server/reconnect").CombinedOutput(); err != nil {
				t.Fatalf("%s: ovsdb-server/reconnect: %v %s", db, err, out)
			}
		}
		drops++
	}
	sent, lost, outage := c.measureUntil(t, "default", "a", b.Status.PodIPs[0].IP, 1800, 100*time.Millisecond, func() {
		for _, name := range []string{ovnpki.CentralCASecret, ovnpki.ChassisCASecret} {
			patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:"e2e"}}}`, ovnpki.AnnotationRotate)
			if _, err := secrets.Patch(ctx, name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
				t.Fatalf("asking for a rotation of %s: %v", name, err)
			}
		}
		start = time.Now()
	}, func() {
		seen := map[string]bool{}
		lastDrop := time.Now()
		if err := eventually(4*time.Minute, func() error {
			if time.Since(lastDrop) >= 2*time.Second {
				dropSessions()
				lastDrop = time.Now()
			}
			var busy []string
			for _, name := range []string{ovnpki.CentralCASecret, ovnpki.ChassisCASecret} {
				s, err := secrets.Get(ctx, name, metav1.GetOptions{})
				if err != nil {
					return err
				}
				step := s.Annotations[ovnpki.AnnotationRotationStep]
				if key := name + ": " + step; step != "" && !seen[key] {
					seen[key] = true
					steps = append(steps, fmt.Sprintf("%s %s at %.1fs", name, step, time.Since(start).Seconds()))
				}
				if step != "" || s.Annotations[ovnpki.AnnotationRotate] != "" || len(s.Data[ovnpki.KeyPreviousCert]) > 0 {
					busy = append(busy, fmt.Sprintf("%s (%q)", name, step))
				}
			}
			if len(busy) > 0 {
				return fmt.Errorf("rotation under way: %v", busy)
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		steps = append(steps, fmt.Sprintf("done at %.1fs", time.Since(start).Seconds()))
		newCentral, newChassis := caOf(t, c, ovnpki.CentralCASecret), caOf(t, c, ovnpki.ChassisCASecret)
		if newCentral.Equal(oldCentral) || newChassis.Equal(oldChassis) {
			t.Fatal("a CA is the one before the rotation")
		}
		if err := eventually(60*time.Second, func() error {
			for n := 1; n <= cfg.Nodes; n++ {
				if _, err := chassisIdentity(cfg, n, newChassis); err != nil {
					return err
				}
			}
			out, err := exec.Command("ovn-nbctl", "--db="+c.info.NBAddr, "--timeout=10", "--wait=hv", "sync").CombinedOutput()
			if err != nil {
				return fmt.Errorf("ovn-nbctl --wait=hv sync: %v %s", err, out)
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	})
	if lost > 0 {
		t.Errorf("a -> b across the rotation: %d of %d probes lost (longest outage %s), want none", lost, sent, outage)
	}
	// Open sessions outlive a certificate change, so the stream alone cannot tell a gap: no
	// TLS connection of an OVN daemon (each ovn-controller to SB, northd to NB, the raft
	// members) may have failed during the rotation, which each side logs.
	if failed := tlsFailuresSince(t, c, start); len(failed) > 0 {
		t.Errorf("TLS connections failed during the rotation:\n%s", strings.Join(failed, "\n"))
	}
	tlsSecret, err := secrets.Get(ctx, ovnpki.CentralSecret, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	newCentral := caOf(t, c, ovnpki.CentralCASecret)
	if leaf, err := pki.ParseCertificate(tlsSecret.Data[ovnpki.KeyCert]); err != nil || leaf.CheckSignatureFrom(newCentral) != nil {
		t.Errorf("OVN central's certificate is not the new central CA's: %v", err)
	}
	if n := bytes.Count(tlsSecret.Data[ovnpki.KeyCA], []byte("BEGIN CERTIFICATE")); n != 1 {
		t.Errorf("NB trusts %d CAs after the rotation, want 1", n)
	}
	// The old certificates, their clients trusting the new CA (only the server can refuse).
	for what, id := range map[string]rig.OVSDBTLS{"NB": oldClient, "SB": oldNode} {
		ep := map[string]string{"NB": nb, "SB": sb}[what]
		writePEM(t, id.CA(), newCentral)
		if out, err := ovsdbAs(ns, id, "ovsdb-client", "list-dbs", ep); err == nil {
			t.Errorf("%s took a certificate of its retired CA: %s", what, out)
		}
	}
	t.Logf("both OVN CAs rotated (%s), NB and SB dropping every session %d times meanwhile; %d of %d probes a -> b lost; every node on a new chassis certificate, every ovn-controller acknowledged; NB and SB refuse the old CAs' certificates",
		strings.Join(steps, ", "), drops, lost, sent)
}

// identityFrom issues a client certificate named cn from the CA in Secret name, as a directory
// whose ca.crt is that CA.
func identityFrom(t *testing.T, c *cluster, name, cn string) rig.OVSDBTLS {
	t.Helper()
	s, err := c.kc.CoreV1().Secrets("kube-system").Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ca, err := pki.LoadCA(s.Data[ovnpki.KeyCert], s.Data[ovnpki.KeyKey])
	if err != nil {
		t.Fatal(err)
	}
	certPEM, keyPEM, err := ca.Issue(pki.Request{CommonName: cn, Usage: pki.Client, Validity: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	id := rig.OVSDBTLS{Dir: t.TempDir()}
	for path, data := range map[string][]byte{id.Cert(): certPEM, id.Key(): keyPEM, id.CA(): ca.CertPEM} {
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return id
}

func writePEM(t *testing.T, path string, cert *x509.Certificate) {
	t.Helper()
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert.Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
}

// tlsFailurePattern is how OVS's stream-ssl logs a handshake or verification that failed.
var tlsFailurePattern = regexp.MustCompile(`(?i)(SSL_(connect|accept)|verify failed|unknown ca|bad certificate|certificate (expired|unknown|required))`)

// tlsFailuresSince are the log lines of OVN central's and every node's OVN containers since
// since that report a failed TLS connection. Lines are taken by OVS's own timestamp (seconds):
// kubectl's --since-time is as coarse, and the subtest before this one makes refused
// connections on purpose.
func tlsFailuresSince(t *testing.T, c *cluster, since time.Time) []string {
	t.Helper()
	since = since.Truncate(time.Second)
	var failed []string
	for app, containers := range map[string][]string{"kovn-ovs": {"ovn-controller", "ovsdb"}, "kovn-ovn-central": {"nb", "sb", "northd"}} {
		pods, err := c.kc.CoreV1().Pods("kube-system").List(context.Background(), metav1.ListOptions{LabelSelector: "app=" + app})
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range pods.Items {
			for _, ctr := range containers {
				out, err := c.kubectl("logs", "-n", "kube-system", p.Name, "-c", ctr, "--since-time="+since.Add(-time.Second).UTC().Format(time.RFC3339))
				if err != nil {
					t.Fatalf("logs of %s/%s: %v %s", p.Name, ctr, err, out)
				}
				for _, l := range strings.Split(out, "\n") {
					stamp, _, _ := strings.Cut(l, "|")
					if at, err := time.Parse(time.RFC3339, stamp); err == nil && at.Before(since) {
						continue
					}
					if tlsFailurePattern.MatchString(l) {
						failed = append(failed, p.Name+"/"+ctr+": "+l)
					}
				}
			}
		}
	}
	return failed
}
