package ovnpki

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"net"
	"strings"
	"testing"
	"time"

	certv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/kovn/kovn/pkg/pki"
)

const daemonUser = "system:serviceaccount:kube-system:kovn-daemon"

func csrPEM(t *testing.T, tmpl *x509.CertificateRequest, key any) []byte {
	t.Helper()
	der, err := x509.CreateCertificateRequest(rand.Reader, tmpl, key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der})
}

// chassisCSR is what kovn-daemon of node sends, before a case bends it.
func chassisCSR(t *testing.T, node, cn string) *certv1.CertificateSigningRequest {
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	return &certv1.CertificateSigningRequest{ObjectMeta: metav1.ObjectMeta{Name: "kovn-chassis-" + node},
		Spec: certv1.CertificateSigningRequestSpec{SignerName: SignerName, Username: daemonUser,
			Extra:   map[string]certv1.ExtraValue{NodeNameExtra: {node}},
			Usages:  []certv1.KeyUsage{certv1.UsageDigitalSignature, certv1.UsageClientAuth},
			Request: csrPEM(t, &x509.CertificateRequest{Subject: pkix.Name{CommonName: cn}}, key)}}
}

func TestJudge(t *testing.T) {
	rsaKey, _ := rsa.GenerateKey(rand.Reader, 2048)
	ecKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	for name, tc := range map[string]struct {
		bend func(*certv1.CertificateSigningRequest)
		deny string // "" approves
	}{
		"own chassis":      {},
		"another node's":   {bend: func(c *certv1.CertificateSigningRequest) { c.Spec.Extra[NodeNameExtra] = certv1.ExtraValue{"n2"} }, deny: `chassis "n1" from node "n2"`},
		"not kovn-daemon":  {bend: func(c *certv1.CertificateSigningRequest) { c.Spec.Username = "system:node:n1" }, deny: "only " + daemonUser},
		"token of no node": {bend: func(c *certv1.CertificateSigningRequest) { delete(c.Spec.Extra, NodeNameExtra) }, deny: "not bound to one node"},
		"two nodes":        {bend: func(c *certv1.CertificateSigningRequest) { c.Spec.Extra[NodeNameExtra] = certv1.ExtraValue{"n1", "n2"} }, deny: "not bound to one node"},
		"server usage": {bend: func(c *certv1.CertificateSigningRequest) {
			c.Spec.Usages = append(c.Spec.Usages, certv1.UsageServerAuth)
		}, deny: `usage "server auth"`},
		"no client usage": {bend: func(c *certv1.CertificateSigningRequest) { c.Spec.Usages = c.Spec.Usages[:1] }, deny: "lack client auth"},
		"other signer":    {bend: func(c *certv1.CertificateSigningRequest) { c.Spec.SignerName = "kubernetes.io/kube-apiserver-client" }, deny: "is not " + SignerName},
		"garbage request": {bend: func(c *certv1.CertificateSigningRequest) { c.Spec.Request = []byte("x") }, deny: "not a PEM"},
		"RSA key": {bend: func(c *certv1.CertificateSigningRequest) {
			c.Spec.Request = csrPEM(t, &x509.CertificateRequest{Subject: pkix.Name{CommonName: "n1"}}, rsaKey)
		}, deny: "not ECDSA P-256"},
		"extra SAN": {bend: func(c *certv1.CertificateSigningRequest) {
			c.Spec.Request = csrPEM(t, &x509.CertificateRequest{Subject: pkix.Name{CommonName: "n1"}, IPAddresses: []net.IP{net.ParseIP("10.0.0.1")}}, ecKey)
		}, deny: "beyond the common name"},
		"with organization": {bend: func(c *certv1.CertificateSigningRequest) {
			c.Spec.Request = csrPEM(t, &x509.CertificateRequest{Subject: pkix.Name{CommonName: "n1", Organization: []string{"system:masters"}}}, ecKey)
		}, deny: "beyond the common name"},
	} {
		t.Run(name, func(t *testing.T) {
			csr := chassisCSR(t, "n1", "n1")
			if tc.bend != nil {
				tc.bend(csr)
			}
			v := Judge(csr, daemonUser)
			if tc.deny == "" {
				if !v.Approve || v.Node != "n1" {
					t.Fatalf("refused: %+v", v)
				}
				return
			}
			if v.Approve || !strings.Contains(v.Message, tc.deny) {
				t.Fatalf("verdict %+v, want refusal saying %q", v, tc.deny)
			}
		})
	}
}

func TestSignerSignsOnlyWhatJudgeApproves(t *testing.T) {
	ca, err := pki.NewCA("chassis CA", 24*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	good := chassisCSR(t, "n1", "n1")
	forged := chassisCSR(t, "n2", "n1")
	forged.Name = "forged"
	// An admin approved a request Judge refuses: the signer must still not sign it.
	adminApproved := chassisCSR(t, "n2", "n1")
	adminApproved.Name = "admin-approved"
	adminApproved.Status.Conditions = []certv1.CertificateSigningRequestCondition{{Type: certv1.CertificateApproved, Status: corev1.ConditionTrue}}
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(good, forged, adminApproved).
		WithStatusSubresource(&certv1.CertificateSigningRequest{}).Build()
	s := &Signer{Client: c, DaemonUser: daemonUser}
	s.SetCA(ca)
	ctx := context.Background()
	get := func(name string) *certv1.CertificateSigningRequest {
		var csr certv1.CertificateSigningRequest
		if err := c.Get(ctx, types.NamespacedName{Name: name}, &csr); err != nil {
			t.Fatal(err)
		}
		return &csr
	}
	for _, name := range []string{good.Name, forged.Name, adminApproved.Name} {
		if _, err := s.Reconcile(ctx, ctrl.Request{NamespacedName: types.NamespacedName{Name: name}}); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
	signed := get(good.Name)
	if !HasCondition(signed, certv1.CertificateApproved) || len(signed.Status.Certificate) == 0 {
		t.Fatalf("own chassis request not approved and signed: %+v", signed.Status)
	}
	cert, err := pki.ParseCertificate(signed.Status.Certificate)
	if err != nil {
		t.Fatal(err)
	}
	if cert.Subject.CommonName != "n1" || cert.CheckSignatureFrom(ca.Cert) != nil || cert.ExtKeyUsage[0] != x509.ExtKeyUsageClientAuth {
		t.Errorf("signed certificate: CN %q usages %v", cert.Subject.CommonName, cert.ExtKeyUsage)
	}
	if life := cert.NotAfter.Sub(cert.NotBefore); life > 24*time.Hour+10*time.Minute {
		t.Errorf("certificate outlives its CA: %s", life)
	}
	if f := get(forged.Name); !HasCondition(f, certv1.CertificateDenied) || len(f.Status.Certificate) > 0 {
		t.Errorf("another node's request: %+v", f.Status.Conditions)
	}
	if a := get(adminApproved.Name); !HasCondition(a, certv1.CertificateFailed) || len(a.Status.Certificate) > 0 {
		t.Errorf("admin-approved forged request: %+v", a.Status.Conditions)
	}
}

func TestChassisValidity(t *testing.T) {
	secs := func(d time.Duration) *int32 { v := int32(d.Seconds()); return &v }
	for _, tc := range []struct {
		ask  *int32
		want time.Duration
	}{{nil, DefaultChassisValidity}, {secs(10 * time.Minute), time.Hour}, {secs(48 * time.Hour), 48 * time.Hour}, {secs(365 * 24 * time.Hour), MaxChassisValidity}} {
		csr := &certv1.CertificateSigningRequest{Spec: certv1.CertificateSigningRequestSpec{ExpirationSeconds: tc.ask}}
		if got := chassisValidity(csr); got != tc.want {
			t.Errorf("asked %v: %s, want %s", tc.ask, got, tc.want)
		}
	}
}
