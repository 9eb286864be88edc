// Package ictls gives the clients of the clusterset's databases (IC-NB, IC-SB and
// OVN_ClusterSet) this AZ's certificate, from the Secret its InterConnect names.
//
// The Secret is read with a plain get, not watched: kovn-controller may get that one Secret
// and nothing else in its namespace (a watch would need list on every Secret there). The
// reconcilers ask for it on each pass, at least once a minute; it is read again at most every
// RereadAfter (the passes follow every IC database change), and a renewed certificate is
// presented from the next handshake on: open connections keep their session.
package ictls

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kovnv1 "github.com/kovn/kovn/api/v1alpha1"
	"github.com/kovn/kovn/pkg/ovn"
	"github.com/kovn/kovn/pkg/pki"
)

// DefaultSecretName is the Secret the chart lets kovn-controller read.
const DefaultSecretName = "kovn-clusterset-tls"

// Keys of the Secret, as cert-manager writes a Certificate's.
const (
	KeyCert = corev1.TLSCertKey       // tls.crt
	KeyKey  = corev1.TLSPrivateKeyKey // tls.key
	KeyCA   = "ca.crt"
)

// +kubebuilder:rbac:groups="",namespace=kube-system,resources=secrets,resourceNames=kovn-clusterset-tls,verbs=get

// Loader keeps Creds in step with the Secret an InterConnect names. One Loader serves every
// reconciler that connects to the clusterset's databases.
type Loader struct {
	// Reader gets the Secret; it must not be a caching client (that would list and watch
	// every Secret of the namespace).
	Reader    client.Reader
	Namespace string
	Creds     *ovn.Credentials

	mu       sync.Mutex
	readName client.ObjectKey // the Secret last read, when, and what was wrong with it
	readAt   time.Time
	readErr  error
}

// RereadAfter is how long a read of the Secret serves the passes that follow.
const RereadAfter = 10 * time.Second

// NeedsTLS reports whether any endpoint of the spec uses ssl.
func NeedsTLS(spec *kovnv1.InterConnectSpec) bool {
	for _, ep := range append(append([]string(nil), spec.ICNorthbound...), spec.ICSouthbound...) {
		if strings.HasPrefix(ep, "ssl:") {
			return true
		}
	}
	return false
}

// SecretName is the Secret spec names, or the default.
func SecretName(spec *kovnv1.InterConnectSpec) string {
	if spec.TLSSecretName != "" {
		return spec.TLSSecretName
	}
	return DefaultSecretName
}

// Refresh reads the spec's Secret into Creds when an endpoint uses ssl (at most every
// RereadAfter). The error names the Secret and what is wrong with it; Creds then keeps what
// it last held (usable reports whether it holds anything at all).
func (l *Loader) Refresh(ctx context.Context, spec *kovnv1.InterConnectSpec) (usable bool, err error) {
	if !NeedsTLS(spec) {
		return true, nil
	}
	name := client.ObjectKey{Namespace: l.Namespace, Name: SecretName(spec)}
	l.mu.Lock()
	defer l.mu.Unlock()
	if name != l.readName || time.Since(l.readAt) >= RereadAfter {
		l.rereadLocked(ctx, name)
	}
	_, _, loadErr := l.Creds.Load()
	return loadErr == nil, l.readErr
}

// handshakeReadTimeout bounds the Secret read a handshake may do (Load).
const handshakeReadTimeout = 5 * time.Second

// Load implements ovn.CredentialSource for the clients, which call it on every handshake. It
// reads the Secret again first when the last read is RereadAfter old: a client reconnecting
// after its databases retired a CA then finds the renewed certificate on its own, while no
// reconcile pass runs (a pass may be waiting for that very connection).
func (l *Loader) Load() (*tls.Certificate, *x509.CertPool, error) {
	l.mu.Lock()
	if l.readName.Name != "" && time.Since(l.readAt) >= RereadAfter {
		ctx, cancel := context.WithTimeout(context.Background(), handshakeReadTimeout)
		l.rereadLocked(ctx, l.readName)
		cancel()
	}
	l.mu.Unlock()
	return l.Creds.Load()
}

// rereadLocked reads Secret name into Creds now and keeps when and how that went; l.mu held.
func (l *Loader) rereadLocked(ctx context.Context, name client.ObjectKey) {
	l.readName, l.readAt, l.readErr = name, time.Now(), l.load(ctx, name)
	if l.readErr != nil {
		l.readErr = fmt.Errorf("clusterset Secret %s: %w", name, l.readErr)
	}
}

// Describe names the certificate in use (CN, serial, end of validity), so an operator and a
// rotation see which one it is; "" while none is loaded.
func (l *Loader) Describe() string {
	pair, _, err := l.Creds.Load()
	if err != nil || pair.Leaf == nil {
		return ""
	}
	return fmt.Sprintf("%s (serial %s, valid until %s)", pair.Leaf.Subject.CommonName, pair.Leaf.SerialNumber.Text(16),
		pair.Leaf.NotAfter.UTC().Format(time.RFC3339))
}

// Names are the AZ names the certificate in use may act for (its CN, then its DNS names: the
// clusterset's IC-SB relay lets it write those AZs' rows only); nil while none is loaded.
func (l *Loader) Names() []string {
	pair, _, err := l.Creds.Load()
	if err != nil || pair.Leaf == nil {
		return nil
	}
	return append([]string{pair.Leaf.Subject.CommonName}, pair.Leaf.DNSNames...)
}

func (l *Loader) load(ctx context.Context, name client.ObjectKey) error {
	var s corev1.Secret
	if err := l.Reader.Get(ctx, name, &s); err != nil {
		return err
	}
	var missing []string
	for _, k := range []string{KeyCert, KeyKey, KeyCA} {
		if len(s.Data[k]) == 0 {
			missing = append(missing, k)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("no %s", strings.Join(missing, ", "))
	}
	cert, err := pki.ParseCertificate(s.Data[KeyCert])
	if err != nil {
		return fmt.Errorf("%s: %w", KeyCert, err)
	}
	if now := time.Now(); now.After(cert.NotAfter) || now.Before(cert.NotBefore) {
		return fmt.Errorf("%s is valid from %s to %s only", KeyCert, cert.NotBefore.UTC().Format(time.RFC3339), cert.NotAfter.UTC().Format(time.RFC3339))
	}
	return l.Creds.Set(s.Data[KeyCert], s.Data[KeyKey], s.Data[KeyCA])
}
