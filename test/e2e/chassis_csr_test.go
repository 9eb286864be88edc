package e2e

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	libovsdb "github.com/ovn-org/libovsdb/client"
	certv1 "k8s.io/api/certificates/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kovn/kovn/pkg/cluster/ovnpki"
	"github.com/kovn/kovn/pkg/node/chassistls"
	"github.com/kovn/kovn/pkg/ovn"
	"github.com/kovn/kovn/pkg/ovn/model/vswitch"
	"github.com/kovn/kovn/pkg/pki"
	"github.com/kovn/kovn/test/rig"
)

// checkChassisCSRs: kovn-daemon of c1-n1, with its own node-bound token, gets a chassis
// certificate for c1-n1 from kovn-controller's signer (through the real apiserver) into an
// Open_vSwitch database's SSL row; the same credentials asking for c1-n2, or anyone else
// asking, are refused; the rights each side holds for it are exactly these.
func checkChassisCSRs(t *testing.T, r *rig.Rig, c *cluster) {
	c.t = t
	ctx := context.Background()
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	daemon, err := client.New(componentConfig(t, r.State, "c1-n1", "kovn-daemon"), client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	req := &chassistls.Requester{Reader: daemon, Writer: daemon, OVS: throwawayOVSDB(t), Node: "c1-n1", Namespace: "kube-system",
		Dir: filepath.Join(t.TempDir(), "chassis-tls"), Validity: 24 * time.Hour, SignTimeout: 30 * time.Second, Log: logr.Discard()}
	start := time.Now()
	if _, err := req.Ensure(ctx); err != nil {
		t.Fatalf("kovn-daemon of c1-n1 asking for its chassis certificate: %v", err)
	}
	t.Logf("c1-n1's chassis certificate signed and in the SSL row in %s", time.Since(start).Round(time.Millisecond))
	leaf := sslLeaf(t, req)
	chassisCA, centralCA := caOf(t, c, ovnpki.ChassisCASecret), caOf(t, c, ovnpki.CentralCASecret)
	if leaf.Subject.CommonName != "c1-n1" || leaf.CheckSignatureFrom(chassisCA) != nil {
		t.Errorf("certificate CN %q, signed by the chassis CA: %v", leaf.Subject.CommonName, leaf.CheckSignatureFrom(chassisCA))
	}
	if leaf.CheckSignatureFrom(centralCA) == nil {
		t.Error("a chassis certificate verifies against the central CA: it would open NB")
	}

	// The same credentials for another node's chassis: the signer's refusal, no certificate.
	forged := *req
	forged.Node, forged.Dir = "c1-n2", filepath.Join(t.TempDir(), "forged")
	if _, err := forged.Ensure(ctx); err == nil || !strings.Contains(err.Error(), "denied") || !strings.Contains(err.Error(), `from node "c1-n1"`) {
		t.Errorf("kovn-daemon of c1-n1 asking for c1-n2's chassis: %v, want the signer's denial", err)
	}
	// Anyone but kovn-daemon (here the admin) is refused too.
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	der, _ := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{Subject: pkix.Name{CommonName: "c1-n1"}}, key)
	adminCSR, err := c.kc.CertificatesV1().CertificateSigningRequests().Create(ctx, &certv1.CertificateSigningRequest{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "e2e-admin-chassis-"},
		Spec: certv1.CertificateSigningRequestSpec{SignerName: ovnpki.SignerName, Request: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der}),
			Usages: []certv1.KeyUsage{certv1.UsageDigitalSignature, certv1.UsageClientAuth}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := eventually(30*time.Second, func() error {
		got, err := c.kc.CertificatesV1().CertificateSigningRequests().Get(ctx, adminCSR.Name, metav1.GetOptions{})
		if err == nil && (len(got.Status.Certificate) > 0 || !ovnpki.HasCondition(got, certv1.CertificateDenied)) {
			err = fmt.Errorf("status %+v", got.Status.Conditions)
		}
		return err
	}); err != nil {
		t.Errorf("the admin's chassis CSR not denied: %v", err)
	}

	for _, tc := range []struct{ sa, want, args string }{
		{"kovn-controller", "yes", "create secrets -n kube-system"},
		{"kovn-controller", "yes", "update secrets/kovn-ovn-chassis-ca -n kube-system"},
		{"kovn-controller", "no", "get secrets/kube-root-ca -n kube-system"},
		{"kovn-controller", "no", "list secrets -n kube-system"},
		{"kovn-daemon", "yes", "get configmaps/kovn-ovn-ca -n kube-system"},
		{"kovn-daemon", "no", "get secrets/kovn-ovn-chassis-ca -n kube-system"},
		{"kovn-daemon", "yes", "create certificatesigningrequests"},
		{"kovn-daemon", "no", "update certificatesigningrequests/approval"},
		{"kovn-daemon", "no", "update certificatesigningrequests/status"},
	} {
		out, _ := c.kubectl(append(append([]string{"auth", "can-i"}, strings.Fields(tc.args)...), "--as=system:serviceaccount:kube-system:"+tc.sa)...)
		lines := strings.Split(strings.TrimSpace(out), "\n")
		if got := lines[len(lines)-1]; got != tc.want {
			t.Errorf("kubectl auth can-i %s as %s: %q, want %q", tc.args, tc.sa, got, tc.want)
		}
	}
}

// throwawayOVSDB is a real ovsdb-server with an empty Open_vSwitch database, started (and
// stopped, by its pid) by the test.
func throwawayOVSDB(t *testing.T) libovsdb.Client {
	t.Helper()
	dir := t.TempDir()
	db, sock := filepath.Join(dir, "conf.db"), filepath.Join(dir, "db.sock")
	if out, err := exec.Command("ovsdb-tool", "create", db, "/usr/share/openvswitch/vswitch.ovsschema").CombinedOutput(); err != nil {
		t.Fatalf("ovsdb-tool create: %v %s", err, out)
	}
	srv := exec.Command("ovsdb-server", db, "--remote=punix:"+sock, "--unixctl="+filepath.Join(dir, "ctl"), "--log-file="+filepath.Join(dir, "log"))
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Process.Kill(); _ = srv.Wait() })
	if err := eventually(10*time.Second, func() error {
		_, err := os.Stat(sock)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("ovs-vsctl", "--db=unix:"+sock, "--no-wait", "init").CombinedOutput(); err != nil {
		t.Fatalf("ovs-vsctl init: %v %s", err, out)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ovs, err := ovn.ConnectOVS(ctx, ovn.Config{Endpoints: []string{"unix:" + sock}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ovs.Close)
	return ovs
}

// sslLeaf waits for the SSL row and returns the certificate it names, checked against its key.
func sslLeaf(t *testing.T, req *chassistls.Requester) *x509.Certificate {
	t.Helper()
	var leaf *x509.Certificate
	if err := eventually(10*time.Second, func() error {
		var rows []vswitch.SSL
		if err := req.OVS.List(context.Background(), &rows); err != nil || len(rows) != 1 {
			return fmt.Errorf("SSL rows %d: %v", len(rows), err)
		}
		pair, err := tls.LoadX509KeyPair(rows[0].Certificate, rows[0].PrivateKey)
		if err != nil {
			return err
		}
		leaf = pair.Leaf
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return leaf
}

func caOf(t *testing.T, c *cluster, secret string) *x509.Certificate {
	t.Helper()
	s, err := c.kc.CoreV1().Secrets("kube-system").Get(context.Background(), secret, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("Secret %s: %v", secret, err)
	}
	ca, err := pki.ParseCertificate(s.Data["tls.crt"])
	if err != nil {
		t.Fatal(err)
	}
	return ca
}
