package ictls

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	kovnv1 "github.com/kovn/kovn/api/v1alpha1"
	"github.com/kovn/kovn/pkg/ovn"
	"github.com/kovn/kovn/pkg/pki"
)

// TestLoad: a missing Secret, missing keys, an expired certificate and a key of another
// certificate are each reported naming the Secret; the last good certificate stays usable
// after a good one was loaded; tcp: endpoints need no Secret at all.
func TestLoad(t *testing.T) {
	ca, err := pki.NewCA("clusterset ca", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	issue := func(validity time.Duration) (c, k []byte) {
		c, k, err := ca.Issue(pki.Request{CommonName: "az1", Usage: pki.Client, Validity: validity})
		if err != nil {
			t.Fatal(err)
		}
		return c, k
	}
	goodCert, goodKey := issue(time.Hour)
	otherCert, _ := issue(time.Hour)
	expiredCert, expiredKey := issue(time.Nanosecond)
	time.Sleep(time.Millisecond)
	// A certificate backdated by clockSkew expires 5 minutes before "now + validity": one
	// issued for a nanosecond is already expired.
	secret := func(data map[string][]byte) *corev1.Secret {
		return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: DefaultSecretName}, Data: data}
	}
	spec := &kovnv1.InterConnectSpec{ICNorthbound: []string{"ssl:10.0.0.1:6645"}, ICSouthbound: []string{"ssl:10.0.0.1:6646"}}
	steps := []struct {
		desc       string
		secret     *corev1.Secret
		wantErr    string
		wantUsable bool
	}{
		{"no Secret", nil, `Secret kube-system/kovn-clusterset-tls: secrets "kovn-clusterset-tls" not found`, false},
		{"missing keys", secret(map[string][]byte{KeyCert: goodCert}), "Secret kube-system/kovn-clusterset-tls: no tls.key, ca.crt", false},
		{"expired", secret(map[string][]byte{KeyCert: expiredCert, KeyKey: expiredKey, KeyCA: ca.CertPEM}), "tls.crt is valid from", false},
		{"good", secret(map[string][]byte{KeyCert: goodCert, KeyKey: goodKey, KeyCA: ca.CertPEM}), "", true},
		{"key of another certificate", secret(map[string][]byte{KeyCert: otherCert, KeyKey: goodKey, KeyCA: ca.CertPEM}), "private key does not match public key", true},
		{"deleted after a good one", nil, "not found", true},
	}
	creds := &ovn.Credentials{}
	for _, s := range steps {
		b := fake.NewClientBuilder()
		if s.secret != nil {
			b = b.WithObjects(s.secret)
		}
		l := &Loader{Reader: b.Build(), Namespace: "kube-system", Creds: creds}
		usable, err := l.Refresh(context.Background(), spec)
		switch {
		case s.wantErr == "" && err != nil:
			t.Errorf("%s: Load = %v", s.desc, err)
		case s.wantErr != "" && (err == nil || !strings.Contains(err.Error(), s.wantErr)):
			t.Errorf("%s: Load error = %v, want one containing %q", s.desc, err, s.wantErr)
		}
		if usable != s.wantUsable {
			t.Errorf("%s: usable = %t, want %t", s.desc, usable, s.wantUsable)
		}
	}
	if pair, _, err := creds.Load(); err != nil || pair == nil {
		t.Fatalf("credentials after the steps: %v", err)
	}
	// What is in use is the good certificate, named so an operator can tell it from a renewed one.
	goodLeaf, err := pki.ParseCertificate(goodCert)
	if err != nil {
		t.Fatal(err)
	}
	wantDesc := "az1 (serial " + goodLeaf.SerialNumber.Text(16) + ", valid until " + goodLeaf.NotAfter.UTC().Format(time.RFC3339) + ")"
	if got := (&Loader{Creds: creds}).Describe(); got != wantDesc {
		t.Errorf("Describe = %q, want %q", got, wantDesc)
	}
	if got := (&Loader{Creds: &ovn.Credentials{}}).Describe(); got != "" {
		t.Errorf("Describe with nothing loaded = %q, want empty", got)
	}
	// A read serves the passes of the next RereadAfter: the Secret deleted meanwhile is not seen.
	good := secret(map[string][]byte{KeyCert: goodCert, KeyKey: goodKey, KeyCA: ca.CertPEM})
	c := fake.NewClientBuilder().WithObjects(good).Build()
	l := &Loader{Reader: c, Namespace: "kube-system", Creds: &ovn.Credentials{}}
	if _, err := l.Refresh(context.Background(), spec); err != nil {
		t.Fatal(err)
	}
	if err := c.Delete(context.Background(), good); err != nil {
		t.Fatal(err)
	}
	if usable, err := l.Refresh(context.Background(), spec); !usable || err != nil {
		t.Errorf("second Load within RereadAfter = %t, %v; want the first read's result, no new read", usable, err)
	}
	tcp := &kovnv1.InterConnectSpec{ICNorthbound: []string{"tcp:10.0.0.1:6645"}, ICSouthbound: []string{"tcp:10.0.0.1:6646"}, InsecurePlainTCP: true}
	l = &Loader{Reader: fake.NewClientBuilder().Build(), Namespace: "kube-system", Creds: &ovn.Credentials{}}
	if usable, err := l.Refresh(context.Background(), tcp); !usable || err != nil {
		t.Errorf("tcp endpoints: Load = %t, %v; want usable without a Secret", usable, err)
	}
}

// TestHandshakeRereads: a handshake (Load, as libovsdb calls it) reads a renewed Secret once
// the last read is RereadAfter old, with no reconcile pass; a younger read is reused.
func TestHandshakeRereads(t *testing.T) {
	ca, err := pki.NewCA("clusterset ca", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	secret := func() *corev1.Secret {
		c, k, err := ca.Issue(pki.Request{CommonName: "az1", Usage: pki.Client, Validity: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: DefaultSecretName},
			Data: map[string][]byte{KeyCert: c, KeyKey: k, KeyCA: ca.CertPEM}}
	}
	first := secret()
	c := fake.NewClientBuilder().WithObjects(first).Build()
	l := &Loader{Reader: c, Namespace: "kube-system", Creds: &ovn.Credentials{}}
	spec := &kovnv1.InterConnectSpec{ICNorthbound: []string{"ssl:10.0.0.1:6645"}, ICSouthbound: []string{"ssl:10.0.0.1:6646"}}
	if _, err := l.Refresh(context.Background(), spec); err != nil {
		t.Fatal(err)
	}
	renewed := secret()
	cur := &corev1.Secret{}
	if err := c.Get(context.Background(), client.ObjectKeyFromObject(first), cur); err != nil {
		t.Fatal(err)
	}
	cur.Data = renewed.Data
	if err := c.Update(context.Background(), cur); err != nil {
		t.Fatal(err)
	}
	serialOf := func() string {
		pair, _, err := l.Load()
		if err != nil {
			t.Fatal(err)
		}
		return pair.Leaf.SerialNumber.String()
	}
	leafOf := func(s *corev1.Secret) string {
		cert, err := pki.ParseCertificate(s.Data[KeyCert])
		if err != nil {
			t.Fatal(err)
		}
		return cert.SerialNumber.String()
	}
	if got := serialOf(); got != leafOf(first) {
		t.Errorf("handshake within RereadAfter presents serial %s, want the first certificate's %s", got, leafOf(first))
	}
	l.readAt = time.Now().Add(-RereadAfter)
	if got := serialOf(); got != leafOf(renewed) {
		t.Errorf("handshake after RereadAfter presents serial %s, want the renewed certificate's %s", got, leafOf(renewed))
	}
}
