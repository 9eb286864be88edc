// Package chassistls gets the node its chassis certificate and hands it to ovn-controller.
//
// kovn-daemon makes a key on the node (it never leaves it), asks for a certificate with
// CN = the node name through a CertificateSigningRequest of signer kovn.io/ovn-chassis (which
// kovn-controller signs only for kovn-daemon of that very node), and writes key, certificate
// and the central CA (ConfigMap kovn-ovn-ca, what SB's certificate is verified with) into a new
// directory per certificate. Then one transaction points the Open_vSwitch SSL row at that
// directory: ovn-controller reads its TLS files from that row on every loop, so it switches to
// the new pair as a whole (never a new key with an old certificate) without a restart, and its
// open SB session stays. Renewed at half of the certificate's lifetime.
package chassistls

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
	"path/filepath"
	"strings"
	"time"

	"github.com/go-logr/logr"
	libovsdb "github.com/ovn-org/libovsdb/client"
	certv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kovn/kovn/pkg/cluster/ovnpki"
	"github.com/kovn/kovn/pkg/ovn"
	"github.com/kovn/kovn/pkg/ovn/model/vswitch"
	"github.com/kovn/kovn/pkg/pki"
)

// +kubebuilder:rbac:groups=certificates.k8s.io,resources=certificatesigningrequests,verbs=create;get
// +kubebuilder:rbac:groups="",namespace=kube-system,resources=configmaps,resourceNames=kovn-ovn-ca,verbs=get

// File names inside a certificate's directory.
const (
	KeyFile  = "tls.key"
	CertFile = "tls.crt"
	CAFile   = "ca.crt"
)

// Requester keeps the node's chassis certificate current.
type Requester struct {
	// Reader reads the CSR back and the CA ConfigMap (uncached: kovn-daemon may not list
	// them); Writer creates the CSR.
	Reader client.Reader
	Writer client.Client
	OVS    libovsdb.Client
	Node   string
	// Namespace holds the CA ConfigMap.
	Namespace string
	// Dir gets one subdirectory per certificate (visible to ovn-controller at the same path).
	Dir string
	// Validity asked for (the signer caps it); SignTimeout bounds the wait for a signature.
	Validity    time.Duration
	SignTimeout time.Duration
	Log         logr.Logger
}

// Ensure makes sure ovn-controller is pointed at a certificate of this node that is not due
// for renewal, with the current CA; it returns when the next renewal is due.
func (r *Requester) Ensure(ctx context.Context) (time.Time, error) {
	var cm corev1.ConfigMap
	if err := r.Reader.Get(ctx, client.ObjectKey{Namespace: r.Namespace, Name: ovnpki.CAConfigMap}, &cm); err != nil {
		return time.Time{}, fmt.Errorf("reading the OVN central CA (ConfigMap %s/%s): %w", r.Namespace, ovnpki.CAConfigMap, err)
	}
	caPEM := []byte(cm.Data[ovnpki.KeyCA])
	if _, err := pki.ParseCertificate(caPEM); err != nil {
		return time.Time{}, fmt.Errorf("ConfigMap %s/%s %s: %w", r.Namespace, ovnpki.CAConfigMap, ovnpki.KeyCA, err)
	}
	// The chassis CA that issues now: a certificate of another (a rotation's previous CA) is
	// replaced while SB still trusts both.
	issuer, _ := pki.ParseCertificate([]byte(cm.Data[ovnpki.KeyChassisCA]))
	ssl, err := currentSSL(ctx, r.OVS)
	if err != nil {
		return time.Time{}, err
	}
	if ssl != nil {
		if due, ok := r.usable(ssl, caPEM, issuer); ok {
			return due, nil
		}
	}
	dir, cert, err := r.obtain(ctx, caPEM)
	if err != nil {
		return time.Time{}, err
	}
	if err := setSSL(ctx, r.OVS, filepath.Join(dir, KeyFile), filepath.Join(dir, CertFile), filepath.Join(dir, CAFile)); err != nil {
		return time.Time{}, err
	}
	r.Log.Info("chassis certificate in use", "dir", dir, "notAfter", cert.NotAfter)
	r.removeOthers(dir)
	return pki.RenewalTime(cert), nil
}

// usable reports whether the SSL row points at this node's own certificate, in Dir, still
// before its renewal time, issued by issuer (when known), with ca.crt equal to the current
// CA bundle.
func (r *Requester) usable(ssl *vswitch.SSL, caPEM []byte, issuer *x509.Certificate) (time.Time, bool) {
	dir := filepath.Dir(ssl.Certificate)
	if filepath.Dir(dir) != filepath.Clean(r.Dir) || ssl.PrivateKey != filepath.Join(dir, KeyFile) || ssl.CaCert != filepath.Join(dir, CAFile) {
		return time.Time{}, false
	}
	pair, err := tls.LoadX509KeyPair(ssl.Certificate, ssl.PrivateKey)
	if err != nil || pair.Leaf == nil || pair.Leaf.Subject.CommonName != r.Node {
		return time.Time{}, false
	}
	if issuer != nil && pair.Leaf.CheckSignatureFrom(issuer) != nil {
		return time.Time{}, false
	}
	ca, err := os.ReadFile(ssl.CaCert)
	if err != nil || string(ca) != string(caPEM) {
		return time.Time{}, false
	}
	due := pki.RenewalTime(pair.Leaf)
	return due, time.Now().Before(due)
}

// obtain makes a key, has it certified and writes a new directory with the three files.
func (r *Requester) obtain(ctx context.Context, caPEM []byte) (string, *x509.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return "", nil, err
	}
	certPEM, err := r.request(ctx, key)
	if err != nil {
		return "", nil, err
	}
	cert, err := pki.ParseCertificate(certPEM)
	if err != nil {
		return "", nil, fmt.Errorf("the signed certificate: %w", err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return "", nil, err
	}
	if err := os.MkdirAll(r.Dir, 0o700); err != nil {
		return "", nil, err
	}
	dir, err := os.MkdirTemp(r.Dir, "chassis-")
	if err != nil {
		return "", nil, err
	}
	for name, data := range map[string][]byte{KeyFile: pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}),
		CertFile: certPEM, CAFile: caPEM} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			return "", nil, err
		}
	}
	return dir, cert, nil
}

// request sends the CSR and waits for its certificate, or for a refusal, which it returns
// with the signer's message.
func (r *Requester) request(ctx context.Context, key *ecdsa.PrivateKey) ([]byte, error) {
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{Subject: pkix.Name{CommonName: r.Node}}, key)
	if err != nil {
		return nil, err
	}
	secs := int32(r.Validity.Seconds())
	csr := &certv1.CertificateSigningRequest{ObjectMeta: metav1.ObjectMeta{GenerateName: "kovn-chassis-" + r.Node + "-"},
		Spec: certv1.CertificateSigningRequestSpec{SignerName: ovnpki.SignerName, ExpirationSeconds: &secs,
			Request: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der}),
			Usages:  []certv1.KeyUsage{certv1.UsageDigitalSignature, certv1.UsageClientAuth}}}
	if err := r.Writer.Create(ctx, csr); err != nil {
		return nil, fmt.Errorf("creating the chassis CSR: %w", err)
	}
	deadline := time.Now().Add(r.SignTimeout)
	for wait := 50 * time.Millisecond; ; wait = min(2*wait, time.Second) {
		var got certv1.CertificateSigningRequest
		if err := r.Reader.Get(ctx, client.ObjectKeyFromObject(csr), &got); err != nil {
			return nil, fmt.Errorf("reading CSR %s: %w", csr.Name, err)
		}
		if len(got.Status.Certificate) > 0 {
			return got.Status.Certificate, nil
		}
		for _, c := range got.Status.Conditions {
			if c.Type == certv1.CertificateDenied || c.Type == certv1.CertificateFailed {
				return nil, fmt.Errorf("CSR %s %s: %s", csr.Name, strings.ToLower(string(c.Type)), c.Message)
			}
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("CSR %s not signed after %s (is kovn-controller running with --ovn-pki?)", csr.Name, r.SignTimeout)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(wait):
		}
	}
}

// removeOthers deletes the directories of earlier certificates: ovn-controller has the new
// paths in the same row now and keeps a loaded pair in memory.
func (r *Requester) removeOthers(keep string) {
	entries, _ := os.ReadDir(r.Dir)
	for _, e := range entries {
		if p := filepath.Join(r.Dir, e.Name()); e.IsDir() && strings.HasPrefix(e.Name(), "chassis-") && p != keep {
			if err := os.RemoveAll(p); err != nil {
				r.Log.Error(err, "removing an old chassis certificate", "dir", p)
			}
		}
	}
}

func currentSSL(ctx context.Context, c libovsdb.Client) (*vswitch.SSL, error) {
	root, err := ovn.OpenVSwitchRoot(ctx, c)
	if err != nil || root.SSL == nil {
		return nil, err
	}
	ssl := &vswitch.SSL{UUID: *root.SSL}
	if err := c.Get(ctx, ssl); err != nil {
		return nil, nil //nolint:nilerr // a dangling reference is no SSL row
	}
	return ssl, nil
}

// setSSL points the Open_vSwitch SSL row at the files, creating it if there is none: one
// transaction, so ovn-controller sees key, certificate and CA change together.
func setSSL(ctx context.Context, c libovsdb.Client, key, cert, ca string) error {
	root, err := ovn.OpenVSwitchRoot(ctx, c)
	if err != nil {
		return err
	}
	want := &vswitch.SSL{PrivateKey: key, Certificate: cert, CaCert: ca}
	if root.SSL != nil {
		want.UUID = *root.SSL
		if err := c.Get(ctx, &vswitch.SSL{UUID: want.UUID}); err == nil {
			ops, err := c.Where(want).Update(want, &want.PrivateKey, &want.Certificate, &want.CaCert, &want.BootstrapCaCert)
			if err != nil {
				return err
			}
			_, err = ovn.Transact(ctx, c, ops)
			return err
		}
	}
	want.UUID = "newssl"
	ops, err := c.Create(want)
	if err != nil {
		return err
	}
	root.SSL = &want.UUID
	upd, err := c.Where(root).Update(root, &root.SSL)
	if err != nil {
		return err
	}
	_, err = ovn.Transact(ctx, c, append(ops, upd...))
	return err
}

// Recheck is how often kovn-daemon reads the CA ConfigMap again: within a CA rotation's step
// (ovnpki.DefaultRotationStep), so every node trusts the next CA before it issues.
const Recheck = time.Minute

// Run keeps the certificate current until ctx ends: renewed when due, re-checked at least
// every recheck (a new CA, a row someone changed), retried after a failure.
func (r *Requester) Run(ctx context.Context, recheck time.Duration) {
	for {
		next, err := r.Ensure(ctx)
		wait := recheck
		if err != nil {
			r.Log.Error(err, "chassis certificate; ovn-controller keeps the one it has")
			wait = 10 * time.Second
		} else if d := time.Until(next); d < wait {
			wait = max(d, time.Second)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
	}
}
