package main

import (
	"context"
	"fmt"
	"net/netip"
	"path/filepath"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/kovn/kovn/pkg/cluster/ovnpki"
	"github.com/kovn/kovn/pkg/ovn"
)

// pkiRenewInterval is how often the OVN PKI is checked: far below any renewal margin (half of
// a certificate's life), and it puts back a deleted Secret within that time.
const pkiRenewInterval = 10 * time.Minute

// startPKI, with --ovn-pki, completes the OVN PKI and issues this replica's client certificate
// before anything connects to NB: OVN central's pods wait for their Secret, so on a new
// install this is what lets the databases start. It retries until ctx ends, and returns the
// renewer that addPKI then keeps running (nil without --ovn-pki).
func startPKI(ctx context.Context, direct client.Client) (*ovnpki.Renewer, error) {
	if !ovnPKI {
		return nil, nil
	}
	cfg := ovnpki.Config{Namespace: namespace, CertValidity: ovnCertLife, RotationStep: ovnCAStep}
	for _, a := range ovn.SplitEndpoints(ovnCentralIPs) {
		addr, err := netip.ParseAddr(a)
		if err != nil {
			return nil, fmt.Errorf("--ovn-central-addresses: %w", err)
		}
		cfg.CentralAddresses = append(cfg.CentralAddresses, addr)
	}
	ovnCreds = &ovn.Credentials{}
	r := &ovnpki.Renewer{Client: direct, Config: cfg, Creds: ovnCreds}
	for {
		err := r.Pass(ctx)
		if err == nil {
			return r, nil
		}
		ctrl.Log.Error(err, "OVN PKI not ready yet")
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("OVN PKI: %w", err)
		case <-time.After(2 * time.Second):
		}
	}
}

// addPKI runs startPKI's renewer from now on, with the chassis CSR signer, with --ovn-pki.
func addPKI(mgr manager.Manager, r *ovnpki.Renewer) error {
	if r == nil {
		return nil
	}
	signer := &ovnpki.Signer{Client: mgr.GetClient(), DaemonUser: "system:serviceaccount:" + namespace + ":" + daemonSAccount}
	if err := signer.SetupWithManager(mgr); err != nil {
		return err
	}
	// A pass at least twice per rotation step, so each step is held about as long as asked.
	r.Signer, r.Interval, r.Log = signer, min(pkiRenewInterval, max(ovnCAStep/2, 5*time.Second)), ctrl.Log.WithName("ovn-pki")
	return mgr.Add(r)
}

// credentialSource is what NB and SB clients present: the files of --ovn-tls-dir when given
// (an operator's own certificate wins), else this replica's certificate with --ovn-pki, else
// nothing (unix or plain tcp endpoints).
func credentialSource() ovn.CredentialSource {
	switch {
	case ovnTLSDir != "":
		return ovn.FileCredentials(filepath.Join(ovnTLSDir, "tls.crt"), filepath.Join(ovnTLSDir, "tls.key"), filepath.Join(ovnTLSDir, "ca.crt"))
	case ovnCreds != nil:
		return ovnCreds
	}
	return nil
}
