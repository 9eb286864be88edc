package ovnpki

import (
	"bytes"
	"context"
	"time"

	"github.com/go-logr/logr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kovn/kovn/pkg/ovn"
	"github.com/kovn/kovn/pkg/pki"
)

// Renewer keeps the PKI complete and current while kovn-controller runs: every Interval it
// runs Ensure (which renews the central certificate at half-life and puts back a deleted
// Secret), hands the chassis CA to the signer and renews the controller's own certificate
// at half-life. Every replica runs it, the leader or not: each holds its own client
// certificate, and Ensure's writes are conditional on what it read.
type Renewer struct {
	Client client.Client
	Config Config
	Signer *Signer
	Creds  *ovn.Credentials
	// Interval between passes; a failed pass is retried after a tenth of it.
	Interval time.Duration
	Log      logr.Logger

	roots []byte // the CA bundle the controller's credentials were issued with
}

// Start implements manager.Runnable.
func (r *Renewer) Start(ctx context.Context) error {
	for {
		wait := r.Interval
		if err := r.Pass(ctx); err != nil {
			r.Log.Error(err, "OVN PKI pass failed; the certificates in use stay")
			wait /= 10
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(wait):
		}
	}
}

// Pass is one round of Start.
func (r *Renewer) Pass(ctx context.Context) error {
	a, err := Ensure(ctx, r.Client, r.Config)
	if err != nil {
		return err
	}
	for _, msg := range a.Rotations {
		r.Log.Info("OVN CA rotation", "step", msg)
	}
	if r.Signer != nil {
		r.Signer.SetCA(a.Chassis)
	}
	if r.Creds == nil {
		return nil
	}
	pair, _, err := r.Creds.Load()
	if err == nil && pair.Leaf != nil && !pki.RenewalDue(pair.Leaf, time.Now()) && pair.Leaf.CheckSignatureFrom(a.Central.Cert) == nil &&
		bytes.Equal(r.roots, a.CentralBundle) {
		return nil
	}
	r.Log.Info("issuing kovn-controller's OVN client certificate")
	if err := ControllerCredentials(a, r.Creds, r.Config.withDefaults().CertValidity); err != nil {
		return err
	}
	r.roots = a.CentralBundle
	return nil
}

// NeedLeaderElection: every replica renews its own client certificate.
func (r *Renewer) NeedLeaderElection() bool { return false }
