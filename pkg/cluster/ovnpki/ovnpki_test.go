package ovnpki

import (
	"bytes"
	"context"
	"crypto/x509"
	"net/netip"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/kovn/kovn/pkg/ovn"
	"github.com/kovn/kovn/pkg/pki"
)

const ns = "kube-system"

var central = []netip.Addr{netip.MustParseAddr("10.0.0.11"), netip.MustParseAddr("fd00::11")}

func newClient(t *testing.T, objs ...client.Object) client.Client {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	return fake.NewClientBuilder().WithScheme(scheme).WithObjects(objs...).Build()
}

func secret(t *testing.T, c client.Client, name string) *corev1.Secret {
	t.Helper()
	var s corev1.Secret
	if err := c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, &s); err != nil {
		t.Fatalf("Secret %s: %v", name, err)
	}
	return &s
}

func TestEnsureCreatesEverythingOnce(t *testing.T) {
	c := newClient(t)
	ctx := context.Background()
	a, err := Ensure(ctx, c, Config{Namespace: ns, CentralAddresses: central})
	if err != nil {
		t.Fatal(err)
	}
	s := secret(t, c, CentralSecret)
	cert, err := pki.ParseCertificate(s.Data[KeyCert])
	if err != nil {
		t.Fatal(err)
	}
	if err := cert.CheckSignatureFrom(a.Central.Cert); err != nil {
		t.Errorf("central certificate not issued by the central CA: %v", err)
	}
	if cert.CheckSignatureFrom(a.Chassis.Cert) == nil {
		t.Error("central certificate verifies against the chassis CA")
	}
	if cert.Subject.CommonName != CentralCN || len(cert.IPAddresses) != 2 || len(cert.ExtKeyUsage) != 2 {
		t.Errorf("central certificate: CN %q, IPs %v, usages %v", cert.Subject.CommonName, cert.IPAddresses, cert.ExtKeyUsage)
	}
	if !bytes.Equal(s.Data[KeyCA], a.Central.CertPEM) {
		t.Error("ca.crt is not the central CA (NB must trust it alone)")
	}
	if !bytes.Contains(s.Data[KeySBCA], a.Central.CertPEM) || !bytes.Contains(s.Data[KeySBCA], a.Chassis.CertPEM) {
		t.Error("sb-ca.crt lacks one of the CAs SB trusts")
	}
	var cm corev1.ConfigMap
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: CAConfigMap}, &cm); err != nil || cm.Data[KeyCA] != string(a.Central.CertPEM) {
		t.Errorf("ConfigMap %s: %v, ca.crt %q", CAConfigMap, err, cm.Data[KeyCA])
	}
	before := map[string]string{}
	for _, n := range []string{CentralCASecret, ChassisCASecret, CentralSecret} {
		before[n] = secret(t, c, n).ResourceVersion
	}
	if _, err := Ensure(ctx, c, Config{Namespace: ns, CentralAddresses: central}); err != nil {
		t.Fatal(err)
	}
	for n, rv := range before {
		if got := secret(t, c, n).ResourceVersion; got != rv {
			t.Errorf("second pass wrote Secret %s (resourceVersion %s -> %s)", n, rv, got)
		}
	}
}

// TestEnsureReissues: the central certificate is issued again when it is half-way through its
// life, from a CA that is no longer the one in kovn-ovn-ca, or missing an address.
func TestEnsureReissues(t *testing.T) {
	ctx := context.Background()
	for name, tc := range map[string]struct {
		first  Config
		second Config
		reason string
	}{
		"half-life":   {first: Config{CertValidity: 2 * time.Second}, second: Config{}, reason: "half"},
		"new address": {first: Config{}, second: Config{CentralAddresses: append(central, netip.MustParseAddr("10.0.0.12"))}},
		"same":        {first: Config{}, second: Config{}},
	} {
		t.Run(name, func(t *testing.T) {
			c := newClient(t)
			tc.first.Namespace, tc.second.Namespace = ns, ns
			if tc.first.CentralAddresses == nil {
				tc.first.CentralAddresses = central
			}
			if tc.second.CentralAddresses == nil {
				tc.second.CentralAddresses = central
			}
			if _, err := Ensure(ctx, c, tc.first); err != nil {
				t.Fatal(err)
			}
			old := secret(t, c, CentralSecret).Data[KeyCert]
			if tc.reason == "half" {
				time.Sleep(1100 * time.Millisecond) // past half of the 2 s lifetime
			}
			if _, err := Ensure(ctx, c, tc.second); err != nil {
				t.Fatal(err)
			}
			changed := !bytes.Equal(old, secret(t, c, CentralSecret).Data[KeyCert])
			if want := name != "same"; changed != want {
				t.Errorf("certificate reissued: %t, want %t", changed, want)
			}
		})
	}
}

func TestEnsureFollowsANewCA(t *testing.T) {
	ctx := context.Background()
	c := newClient(t)
	if _, err := Ensure(ctx, c, Config{Namespace: ns, CentralAddresses: central}); err != nil {
		t.Fatal(err)
	}
	// An admin replaces the central CA with their own.
	own, err := pki.NewCA("my company's OVN CA", time.Hour*24*365)
	if err != nil {
		t.Fatal(err)
	}
	keyPEM, _ := own.KeyPEM()
	s := secret(t, c, CentralCASecret)
	s.Data = map[string][]byte{KeyCert: own.CertPEM, KeyKey: keyPEM}
	if err := c.Update(ctx, s); err != nil {
		t.Fatal(err)
	}
	a, err := Ensure(ctx, c, Config{Namespace: ns, CentralAddresses: central})
	if err != nil {
		t.Fatal(err)
	}
	if a.Central.Cert.Subject.CommonName != "my company's OVN CA" {
		t.Errorf("the admin's CA was not used: %q", a.Central.Cert.Subject.CommonName)
	}
	if err := a.CentralCert.CheckSignatureFrom(own.Cert); err != nil {
		t.Errorf("central certificate not reissued from the admin's CA: %v", err)
	}
	if got := secret(t, c, CentralSecret).Data[KeyCA]; !bytes.Equal(got, own.CertPEM) {
		t.Error("ca.crt still the old CA")
	}
}

func TestEnsureRefusesABrokenCASecret(t *testing.T) {
	broken := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: CentralCASecret},
		Data: map[string][]byte{KeyCert: []byte("not a certificate")}}
	c := newClient(t, broken)
	_, err := Ensure(context.Background(), c, Config{Namespace: ns, CentralAddresses: central})
	if err == nil || !strings.Contains(err.Error(), "kube-system/kovn-ovn-ca") {
		t.Fatalf("error %v does not name the broken Secret", err)
	}
	if got := secret(t, c, CentralCASecret).Data[KeyCert]; string(got) != "not a certificate" {
		t.Error("the broken Secret was overwritten")
	}
}

// TestRenewerIssuesControllerCredentials: the controller's in-memory client certificate is
// issued by the central CA, for client use only, and kept while it is not due.
func TestRenewerIssuesControllerCredentials(t *testing.T) {
	c := newClient(t)
	creds := &ovn.Credentials{}
	signer := &Signer{}
	r := &Renewer{Client: c, Config: Config{Namespace: ns, CentralAddresses: central}, Signer: signer, Creds: creds}
	if err := r.Pass(context.Background()); err != nil {
		t.Fatal(err)
	}
	pair, roots, err := creds.Load()
	if err != nil {
		t.Fatal(err)
	}
	leaf := pair.Leaf
	if leaf.Subject.CommonName != ControllerCN || len(leaf.ExtKeyUsage) != 1 || leaf.ExtKeyUsage[0] != x509.ExtKeyUsageClientAuth {
		t.Errorf("controller certificate: CN %q usages %v", leaf.Subject.CommonName, leaf.ExtKeyUsage)
	}
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		t.Errorf("controller certificate does not verify against the roots it trusts: %v", err)
	}
	if signer.currentCA() == nil || signer.currentCA().Cert.Subject.CommonName != "kovn OVN chassis CA" {
		t.Error("the signer did not get the chassis CA")
	}
	if err := r.Pass(context.Background()); err != nil {
		t.Fatal(err)
	}
	again, _, _ := creds.Load()
	if again.Leaf.SerialNumber.Cmp(leaf.SerialNumber) != 0 {
		t.Error("a certificate not due was issued again")
	}
}

// TestEnsureLosesTheCreateRace: another replica creates the CA between this one's read and its
// create; this one then uses the other's CA.
func TestEnsureLosesTheCreateRace(t *testing.T) {
	ctx := context.Background()
	other, err := pki.NewCA("the other replica's CA", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	keyPEM, _ := other.KeyPEM()
	c := newClient(t)
	raced := interceptor.Funcs{Create: func(ctx context.Context, cl client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
		if s, ok := obj.(*corev1.Secret); ok && s.Name == CentralCASecret {
			theirs := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: CentralCASecret},
				Data: map[string][]byte{KeyCert: other.CertPEM, KeyKey: keyPEM}}
			if err := cl.Create(ctx, theirs); err != nil {
				return err
			}
		}
		return cl.Create(ctx, obj, opts...)
	}}
	a, err := Ensure(ctx, interceptor.NewClient(c.(client.WithWatch), raced), Config{Namespace: ns, CentralAddresses: central})
	if err != nil {
		t.Fatal(err)
	}
	if a.Central.Cert.Subject.CommonName != "the other replica's CA" {
		t.Errorf("central CA %q, want the other replica's", a.Central.Cert.Subject.CommonName)
	}
}
