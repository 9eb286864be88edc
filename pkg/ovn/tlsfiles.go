package ovn

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"
)

// tlsFiles is a client's certificate, key and CA bundle, read again whenever one of the files
// changed (size or modification time) before a handshake: libovsdb dials anew on every
// reconnect, so a renewed certificate or a CA bundle that gained the next CA takes effect on
// the next connection, with no restart, while the open one keeps its session.
//
// A half-written pair (the certificate renewed, the key not yet) fails to load; the last pair
// that loaded stays in use until both files agree again.
type tlsFiles struct {
	cert, key, ca string

	mu    sync.Mutex
	stamp string
	pair  *tls.Certificate
	roots *x509.CertPool
}

// FileCredentials is a CredentialSource of PEM files, read again whenever they change.
func FileCredentials(cert, key, ca string) CredentialSource {
	return &tlsFiles{cert: cert, key: key, ca: ca}
}

// Load returns the current pair and roots, reading the files again if they changed.
func (f *tlsFiles) Load() (*tls.Certificate, *x509.CertPool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	stamp, statErr := fileStamps(f.cert, f.key, f.ca)
	if statErr == nil && stamp == f.stamp {
		return f.pair, f.roots, nil
	}
	pair, roots, err := f.read() // also what names a missing file
	if err == nil && statErr == nil {
		f.stamp, f.pair, f.roots = stamp, &pair, roots
		return f.pair, f.roots, nil
	}
	if f.pair != nil { // keep the last good files
		return f.pair, f.roots, nil
	}
	return nil, nil, errors.Join(err, statErr)
}

func (f *tlsFiles) read() (tls.Certificate, *x509.CertPool, error) {
	pair, err := tls.LoadX509KeyPair(f.cert, f.key)
	if err != nil {
		return pair, nil, fmt.Errorf("loading OVSDB client certificate: %w", err)
	}
	caPEM, err := os.ReadFile(f.ca)
	if err != nil {
		return pair, nil, fmt.Errorf("loading OVSDB CA certificate: %w", err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(caPEM) {
		return pair, nil, fmt.Errorf("no PEM certificate found in OVSDB CA file %s", f.ca)
	}
	return pair, roots, nil
}

// fileStamps identifies the files' current contents by size and modification time.
func fileStamps(paths ...string) (string, error) {
	stamp := ""
	for _, p := range paths {
		st, err := os.Stat(p)
		if err != nil {
			return "", err
		}
		stamp += fmt.Sprintf("%s:%d:%d;", p, st.Size(), st.ModTime().UnixNano())
	}
	return stamp, nil
}

// clientTLS is the client TLS configuration: src's current certificate on every handshake, the
// server's chain verified against src's current roots and, when serverName is set, its name.
// Go's own verification is switched off only to be replaced by this one, since a tls.Config's
// RootCAs cannot change under it.
func clientTLS(src CredentialSource, serverName string) *tls.Config {
	return &tls.Config{
		MinVersion:         tls.VersionTLS12,
		ServerName:         serverName,
		InsecureSkipVerify: true, // verified in VerifyConnection, against roots read anew
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			pair, _, err := src.Load()
			return pair, err
		},
		VerifyConnection: func(cs tls.ConnectionState) error {
			_, roots, err := src.Load()
			if err != nil {
				return err
			}
			return verifyServer(cs.PeerCertificates, roots, serverName)
		},
	}
}

// verifyServer checks that the server's certificate chains to roots, is meant for a server
// and, when name is set, names it.
func verifyServer(certs []*x509.Certificate, roots *x509.CertPool, name string) error {
	if len(certs) == 0 {
		return errors.New("OVSDB server sent no certificate")
	}
	inter := x509.NewCertPool()
	for _, c := range certs[1:] {
		inter.AddCert(c)
	}
	_, err := certs[0].Verify(x509.VerifyOptions{Roots: roots, Intermediates: inter, DNSName: name,
		CurrentTime: time.Now(), KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}})
	return err
}
