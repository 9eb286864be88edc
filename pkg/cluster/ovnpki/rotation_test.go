package ovnpki

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kovn/kovn/pkg/ovn"
	"github.com/kovn/kovn/pkg/pki"
)

func certsIn(pem []byte) int { return bytes.Count(pem, []byte("BEGIN CERTIFICATE")) }

// TestRotationInThreeSteps: a rotation asked for on the central CA Secret trusts both CAs
// while the old one still issues, then issues every certificate (central, kovn-controller's)
// from the new one while both are trusted, then trusts the new one alone. A step is held for
// RotationStep: with an hour, nothing moves.
func TestRotationInThreeSteps(t *testing.T) {
	ctx := context.Background()
	c := newClient(t)
	cfg := Config{Namespace: ns, CentralAddresses: central, RotationStep: time.Hour}
	creds := &ovn.Credentials{}
	r := &Renewer{Client: c, Config: cfg, Creds: creds, Log: logr.Discard()}
	pass := func(step time.Duration) *Authority {
		t.Helper()
		r.Config.RotationStep = step
		if err := r.Pass(ctx); err != nil {
			t.Fatal(err)
		}
		held := r.Config
		held.RotationStep = time.Hour
		a, err := Ensure(ctx, c, held) // what the pass left, moving nothing
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	old := pass(time.Hour)
	s := secret(t, c, CentralCASecret)
	s.Annotations = map[string]string{AnnotationRotate: "now"}
	if err := c.Update(ctx, s); err != nil {
		t.Fatal(err)
	}
	check := func(step string, a *Authority, issuer *pki.CA, trusted int) {
		t.Helper()
		s := secret(t, c, CentralCASecret)
		if got := s.Annotations[AnnotationRotationStep]; got != step {
			t.Errorf("step %q, want %q", got, step)
		}
		if !a.Central.Cert.Equal(issuer.Cert) {
			t.Errorf("%s: the issuing CA is %s", step, a.Central.Cert.SerialNumber)
		}
		tlsSecret := secret(t, c, CentralSecret)
		leaf, err := pki.ParseCertificate(tlsSecret.Data[KeyCert])
		if err != nil || leaf.CheckSignatureFrom(issuer.Cert) != nil {
			t.Errorf("%s: central certificate not issued by the issuing CA: %v", step, err)
		}
		if n := certsIn(tlsSecret.Data[KeyCA]); n != trusted {
			t.Errorf("%s: NB trusts %d CAs, want %d", step, n, trusted)
		}
		if n := certsIn(tlsSecret.Data[KeySBCA]); n != trusted+1 {
			t.Errorf("%s: SB trusts %d CAs, want %d (and the chassis CA)", step, n, trusted+1)
		}
		var cm = configMap(t, c)
		if n := certsIn([]byte(cm.Data[KeyCA])); n != trusted {
			t.Errorf("%s: nodes trust %d central CAs, want %d", step, n, trusted)
		}
		pair, roots, err := creds.Load()
		if err != nil || pair.Leaf.CheckSignatureFrom(issuer.Cert) != nil {
			t.Errorf("%s: kovn-controller's certificate not issued by the issuing CA: %v", step, err)
		}
		if roots == nil || len(roots.Subjects()) != trusted { //nolint:staticcheck // counting pool entries
			t.Errorf("%s: kovn-controller trusts %v, want %d CAs", step, roots, trusted)
		}
	}
	a := pass(time.Hour)
	check(StepTrustNext, a, old.Central, 2)
	next := pass(time.Hour) // held for an hour: nothing moves
	check(StepTrustNext, next, old.Central, 2)
	a = pass(time.Nanosecond)
	if a.Central.Cert.Equal(old.Central.Cert) {
		t.Fatal("the next CA does not issue after the trust step")
	}
	check(StepRetirePrevious, a, a.Central, 2)
	done := pass(time.Nanosecond)
	check("", done, a.Central, 1)
	if !done.Chassis.Cert.Equal(old.Chassis.Cert) {
		t.Error("the chassis CA changed with the central CA's rotation")
	}
}

// TestRotationOfAnOldCA: a CA kovn made that passed half of its lifetime starts a rotation by
// itself; one an operator brought does not.
func TestRotationOfAnOldCA(t *testing.T) {
	ctx := context.Background()
	c := newClient(t)
	cfg := Config{Namespace: ns, CentralAddresses: central, CAValidity: time.Minute} // backdated 5 min: past half-life
	if _, err := Ensure(ctx, c, cfg); err != nil {
		t.Fatal(err)
	}
	if _, err := Ensure(ctx, c, cfg); err != nil {
		t.Fatal(err)
	}
	if got := secret(t, c, CentralCASecret).Annotations[AnnotationRotationStep]; got != StepTrustNext {
		t.Errorf("kovn's CA past half-life: step %q, want %q", got, StepTrustNext)
	}
	s := secret(t, c, ChassisCASecret)
	s.Labels = nil // as if an operator brought it
	s.Annotations = nil
	delete(s.Data, KeyNextCert)
	delete(s.Data, KeyNextKey)
	if err := c.Update(ctx, s); err != nil {
		t.Fatal(err)
	}
	if _, err := Ensure(ctx, c, cfg); err != nil {
		t.Fatal(err)
	}
	if got := secret(t, c, ChassisCASecret).Annotations[AnnotationRotationStep]; got != "" {
		t.Errorf("an operator's CA past half-life: step %q, want none", got)
	}
}

func configMap(t *testing.T, c client.Client) *corev1.ConfigMap {
	t.Helper()
	var cm corev1.ConfigMap
	if err := c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: CAConfigMap}, &cm); err != nil {
		t.Fatalf("ConfigMap %s: %v", CAConfigMap, err)
	}
	return &cm
}
