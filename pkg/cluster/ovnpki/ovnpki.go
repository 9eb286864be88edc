// Package ovnpki is the cluster's own PKI for its OVN databases, kept by kovn-controller in
// kovn's namespace:
//
//   - the central CA (Secret kovn-ovn-ca) signs the certificate of the OVN central nodes (NB,
//     SB and their raft ports serve it; ovn-northd and ovn-ic present it as clients) and
//     kovn-controller's own client certificate, which never leaves its memory;
//   - the chassis CA (Secret kovn-ovn-chassis-ca) signs one certificate per node, CN = the
//     node name, through the CertificateSigningRequest API (signer kovn.io/ovn-chassis): a
//     node's ovn-controller presents it to SB, whose RBAC lets it write only its own chassis.
//
// NB trusts the central CA only, so a node's certificate cannot open NB (which has no RBAC);
// SB trusts both. The central CA's certificate is public in the ConfigMap kovn-ovn-ca: nodes
// verify SB with it.
//
// Everything is created when missing and renewed at half of its lifetime; a CA an admin put
// in its Secret (their own, or cert-manager's) is used as it is. Renewed files reach the
// servers through the kubelet's Secret volume update, and ovsdb-server reloads changed files
// on its own, so no connection is dropped.
package ovnpki

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"maps"
	"net"
	"net/netip"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kovn/kovn/pkg/ovn"
	"github.com/kovn/kovn/pkg/pki"
)

// Names of the objects in kovn's namespace.
const (
	CentralCASecret = "kovn-ovn-ca"
	ChassisCASecret = "kovn-ovn-chassis-ca"
	// CentralSecret is the OVN central nodes' certificate (tls.crt, tls.key), with ca.crt (the
	// central CA: what NB trusts and clients verify servers with) and sb-ca.crt (the central
	// and the chassis CA: what SB trusts).
	CentralSecret = "kovn-ovn-central-tls"
	// CAConfigMap holds ca.crt, the central CA's certificate, for the nodes.
	CAConfigMap = "kovn-ovn-ca"
)

// Keys of the Secrets and the ConfigMap.
const (
	KeyCert = corev1.TLSCertKey       // tls.crt
	KeyKey  = corev1.TLSPrivateKeyKey // tls.key
	KeyCA   = "ca.crt"
	KeySBCA = "sb-ca.crt"
	// KeyChassisCA (in the ConfigMap) is the chassis CA that issues now.
	KeyChassisCA = "chassis-ca.crt"
)

// Common names of the identities kovn issues.
const (
	CentralCN    = "kovn-ovn-central"
	ControllerCN = "kovn-controller"
)

// +kubebuilder:rbac:groups="",namespace=kube-system,resources=secrets,verbs=create
// +kubebuilder:rbac:groups="",namespace=kube-system,resources=secrets,resourceNames=kovn-ovn-ca;kovn-ovn-chassis-ca;kovn-ovn-central-tls,verbs=get;update
// +kubebuilder:rbac:groups="",namespace=kube-system,resources=configmaps,verbs=create
// +kubebuilder:rbac:groups="",namespace=kube-system,resources=configmaps,resourceNames=kovn-ovn-ca,verbs=get;update

// Config is what the PKI issues.
type Config struct {
	Namespace string
	// CentralAddresses are the addresses clients dial OVN central at (SANs of its certificate).
	CentralAddresses []netip.Addr
	// CAValidity, CertValidity: lifetimes of a new CA and of a new leaf certificate.
	CAValidity   time.Duration
	CertValidity time.Duration
	// RotationStep is how long each step of a CA rotation is held (rotation.go).
	RotationStep time.Duration
}

// Defaults for zero Config fields.
const (
	DefaultCAValidity   = 10 * 365 * 24 * time.Hour
	DefaultCertValidity = 90 * 24 * time.Hour
)

func (c Config) withDefaults() Config {
	if c.CAValidity == 0 {
		c.CAValidity = DefaultCAValidity
	}
	if c.CertValidity == 0 {
		c.CertValidity = DefaultCertValidity
	}
	if c.RotationStep == 0 {
		c.RotationStep = DefaultRotationStep
	}
	return c
}

// Authority is the PKI as read (and completed) in one pass.
type Authority struct {
	// Central and Chassis issue; CentralBundle and ChassisBundle are what they are trusted as
	// (with the next or previous CA during a rotation).
	Central, Chassis             *pki.CA
	CentralBundle, ChassisBundle []byte
	// Rotations says what this pass did to a CA rotation, for the log.
	Rotations []string
	// CentralCert is the central nodes' certificate as the Secret holds it now.
	CentralCert *x509.Certificate
}

// Ensure reads the PKI's Secrets and ConfigMap, creates what is missing and renews what is
// due: the CAs first (a Secret that exists but does not hold a CA is an error naming it, never
// overwritten), then the ConfigMap and the central certificate. c must read Secrets uncached.
func Ensure(ctx context.Context, c client.Client, cfg Config) (*Authority, error) {
	cfg = cfg.withDefaults()
	a := &Authority{}
	var err error
	if a.Central, a.CentralBundle, err = ensureCA(ctx, c, cfg, CentralCASecret, "kovn OVN central CA", &a.Rotations); err != nil {
		return nil, err
	}
	if a.Chassis, a.ChassisBundle, err = ensureCA(ctx, c, cfg, ChassisCASecret, "kovn OVN chassis CA", &a.Rotations); err != nil {
		return nil, err
	}
	if err := ensureCAConfigMap(ctx, c, cfg.Namespace, a.CentralBundle, a.Chassis.CertPEM); err != nil {
		return nil, err
	}
	if a.CentralCert, err = ensureCentralCert(ctx, c, cfg, a); err != nil {
		return nil, err
	}
	return a, nil
}

// ensureCA loads the CA of Secret name and what it is trusted as, making it first if the
// Secret does not exist and advancing a rotation that is due. Two controllers starting at once
// both try; the one whose create fails reads the other's (and a rotation step written by
// another replica meanwhile fails this pass on the update's conflict).
func ensureCA(ctx context.Context, c client.Client, cfg Config, name, cn string, rotations *[]string) (*pki.CA, []byte, error) {
	var s corev1.Secret
	err := c.Get(ctx, client.ObjectKey{Namespace: cfg.Namespace, Name: name}, &s)
	if apierrors.IsNotFound(err) {
		var made *pki.CA
		if made, err = createCA(ctx, c, cfg, name, cn); made != nil || !apierrors.IsAlreadyExists(err) {
			if made == nil {
				return nil, nil, err
			}
			return made, made.CertPEM, err
		}
		err = c.Get(ctx, client.ObjectKey{Namespace: cfg.Namespace, Name: name}, &s)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("reading Secret %s/%s: %w", cfg.Namespace, name, err)
	}
	load := func() (*pki.CA, error) {
		ca, err := pki.LoadCA(s.Data[KeyCert], s.Data[KeyKey])
		if err != nil {
			return nil, fmt.Errorf("the Secret %s/%s does not hold a CA (%s and %s): %w", cfg.Namespace, name, KeyCert, KeyKey, err)
		}
		return ca, nil
	}
	ca, err := load()
	if err != nil {
		return nil, nil, err
	}
	changed, what, err := rotate(&s, cn, cfg, time.Now())
	if err != nil {
		return nil, nil, fmt.Errorf("rotating the CA of Secret %s/%s: %w", cfg.Namespace, name, err)
	}
	if changed {
		if err := c.Update(ctx, &s); err != nil {
			return nil, nil, fmt.Errorf("rotating the CA of Secret %s/%s (%s): %w", cfg.Namespace, name, what, err)
		}
		*rotations = append(*rotations, fmt.Sprintf("Secret %s/%s: %s", cfg.Namespace, name, what))
		if ca, err = load(); err != nil { // the rotation may have put another CA first
			return nil, nil, err
		}
	}
	return ca, trustBundle(s.Data), nil
}

// createCA makes a CA and stores it as Secret name; an AlreadyExists error is returned as it
// is (another replica made it first).
func createCA(ctx context.Context, c client.Client, cfg Config, name, cn string) (*pki.CA, error) {
	ca, err := pki.NewCA(cn, cfg.CAValidity)
	if err != nil {
		return nil, err
	}
	keyPEM, err := ca.KeyPEM()
	if err != nil {
		return nil, err
	}
	s := corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: cfg.Namespace, Name: name, Labels: labels()},
		Type: corev1.SecretTypeTLS, Data: map[string][]byte{KeyCert: ca.CertPEM, KeyKey: keyPEM}}
	if err := c.Create(ctx, &s); err != nil {
		if apierrors.IsAlreadyExists(err) {
			return nil, err
		}
		return nil, fmt.Errorf("creating Secret %s/%s: %w", cfg.Namespace, name, err)
	}
	return ca, nil
}

// ensureCAConfigMap publishes the central CA bundle (what nodes verify SB with) and the
// chassis CA that issues now (a node whose certificate it did not issue asks for a new one).
func ensureCAConfigMap(ctx context.Context, c client.Client, ns string, caPEM, chassisPEM []byte) error {
	var cm corev1.ConfigMap
	want := map[string]string{KeyCA: string(caPEM), KeyChassisCA: string(chassisPEM)}
	err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: CAConfigMap}, &cm)
	if apierrors.IsNotFound(err) {
		cm = corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: CAConfigMap, Labels: labels()}, Data: want}
		if err := c.Create(ctx, &cm); !apierrors.IsAlreadyExists(err) {
			return err
		}
		err = c.Get(ctx, client.ObjectKey{Namespace: ns, Name: CAConfigMap}, &cm)
	}
	if err != nil {
		return fmt.Errorf("reading ConfigMap %s/%s: %w", ns, CAConfigMap, err)
	}
	if cm.Data[KeyCA] == want[KeyCA] && cm.Data[KeyChassisCA] == want[KeyChassisCA] {
		return nil
	}
	if cm.Data == nil {
		cm.Data = map[string]string{}
	}
	maps.Copy(cm.Data, want)
	return c.Update(ctx, &cm)
}

// ensureCentralCert keeps the central Secret holding a certificate of the central CA that
// names every central address and is not due for renewal, with the current CA bundles.
func ensureCentralCert(ctx context.Context, c client.Client, cfg Config, a *Authority) (*x509.Certificate, error) {
	central := a.Central
	var s corev1.Secret
	key := client.ObjectKey{Namespace: cfg.Namespace, Name: CentralSecret}
	err := c.Get(ctx, key, &s)
	exists := err == nil
	if err != nil && !apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("reading Secret %s: %w", key, err)
	}
	sbCA := slices.Concat(a.CentralBundle, a.ChassisBundle)
	cert, reason := currentLeaf(s.Data, central, cfg.CentralAddresses, time.Now())
	if reason == "" && bytes.Equal(s.Data[KeyCA], a.CentralBundle) && bytes.Equal(s.Data[KeySBCA], sbCA) {
		return cert, nil
	}
	data := map[string][]byte{KeyCert: s.Data[KeyCert], KeyKey: s.Data[KeyKey], KeyCA: a.CentralBundle, KeySBCA: sbCA}
	if reason != "" {
		certPEM, keyPEM, err := central.Issue(pki.Request{CommonName: CentralCN, IPs: cfg.CentralAddresses,
			DNSNames: []string{CentralCN}, Usage: pki.Server | pki.Client, Validity: cfg.CertValidity})
		if err != nil {
			return nil, err
		}
		data[KeyCert], data[KeyKey] = certPEM, keyPEM
		if cert, err = pki.ParseCertificate(certPEM); err != nil {
			return nil, err
		}
	}
	s.Data, s.Type = data, corev1.SecretTypeTLS
	if !exists {
		s.ObjectMeta = metav1.ObjectMeta{Namespace: cfg.Namespace, Name: CentralSecret, Labels: labels()}
		err = c.Create(ctx, &s)
	} else {
		err = c.Update(ctx, &s)
	}
	if err != nil {
		return nil, fmt.Errorf("writing Secret %s (%s): %w", key, reason, err)
	}
	return cert, nil
}

// currentLeaf returns the certificate in data and "" if it can stay, or why it must be
// issued again.
func currentLeaf(data map[string][]byte, ca *pki.CA, addrs []netip.Addr, now time.Time) (*x509.Certificate, string) {
	if len(data[KeyCert]) == 0 {
		return nil, "none yet"
	}
	cert, err := pki.ParseCertificate(data[KeyCert])
	if err != nil {
		return nil, "unreadable: " + err.Error()
	}
	if _, err := tls.X509KeyPair(data[KeyCert], data[KeyKey]); err != nil {
		return nil, "key does not match: " + err.Error()
	}
	if err := cert.CheckSignatureFrom(ca.Cert); err != nil {
		return nil, "not issued by the current CA"
	}
	if pki.RenewalDue(cert, now) {
		return nil, "half of its lifetime passed"
	}
	for _, a := range addrs {
		if !slices.ContainsFunc(cert.IPAddresses, func(ip net.IP) bool { b, _ := netip.AddrFromSlice(ip); return b.Unmap() == a.Unmap() }) {
			return nil, "does not name " + a.String()
		}
	}
	return cert, ""
}

// ControllerCredentials issues kovn-controller's own client certificate into creds, with the
// central CA as the roots servers are verified with. Nothing is written: a new one is issued
// at every start and renewal.
func ControllerCredentials(a *Authority, creds *ovn.Credentials, validity time.Duration) error {
	if validity == 0 {
		validity = DefaultCertValidity
	}
	certPEM, keyPEM, err := a.Central.Issue(pki.Request{CommonName: ControllerCN, Usage: pki.Client, Validity: validity})
	if err != nil {
		return err
	}
	return creds.Set(certPEM, keyPEM, a.CentralBundle)
}

func labels() map[string]string {
	return map[string]string{"app.kubernetes.io/managed-by": "kovn", "app.kubernetes.io/component": "ovn-pki"}
}
