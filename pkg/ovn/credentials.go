package ovn

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"sync"
)

// CredentialSource gives a client its certificate and the CAs it trusts, read before every
// handshake: what it returns then is what the next connection presents and verifies with.
type CredentialSource interface {
	Load() (*tls.Certificate, *x509.CertPool, error)
}

// Credentials is a CredentialSource held in memory, for certificates that come from the API
// rather than from files (the Secret an InterConnect names). Set replaces them; a set that
// does not parse leaves the last good pair in use, so a broken Secret never drops a
// connection that worked.
type Credentials struct {
	mu    sync.Mutex
	pair  *tls.Certificate
	roots *x509.CertPool
	// stamp is what was last set (good or not), to skip parsing an unchanged Secret.
	stamp string
	err   error
}

// Set parses a PEM certificate (chain), its key and a CA bundle; on error the previous
// credentials stay and the error is returned (and kept for Load while nothing good was set).
func (c *Credentials) Set(certPEM, keyPEM, caPEM []byte) error {
	stamp := string(certPEM) + "\x00" + string(keyPEM) + "\x00" + string(caPEM)
	c.mu.Lock()
	defer c.mu.Unlock()
	if stamp == c.stamp {
		return c.err
	}
	c.stamp = stamp
	pair, roots, err := parseCredentials(certPEM, keyPEM, caPEM)
	c.err = err
	if err != nil {
		return err
	}
	c.pair, c.roots = &pair, roots
	return nil
}

// Load implements CredentialSource.
func (c *Credentials) Load() (*tls.Certificate, *x509.CertPool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.pair == nil {
		if c.err != nil {
			return nil, nil, c.err
		}
		return nil, nil, errors.New("no OVSDB client certificate loaded yet")
	}
	return c.pair, c.roots, nil
}

func parseCredentials(certPEM, keyPEM, caPEM []byte) (tls.Certificate, *x509.CertPool, error) {
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return pair, nil, fmt.Errorf("certificate and key: %w", err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(caPEM) {
		return pair, nil, errors.New("CA bundle holds no PEM certificate")
	}
	return pair, roots, nil
}
