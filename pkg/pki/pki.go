// Package pki is kovn's own certificate authority: it makes a CA, issues the certificates the
// OVN databases and their clients present to each other (mutual TLS), and says when one is due
// for renewal. Pure Go (crypto/x509), ECDSA P-256 keys, no ovs-pki.
//
// Certificates carry the extended key usage of their role, as OVS enforces it (a client-only
// certificate cannot serve), and every address and name a client dials as a SAN: Go clients
// verify the host name, OVS ones only the chain and the CN.
package pki

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/netip"
	"time"
)

// Usage is what a certificate is for.
type Usage int

const (
	// Server certificates are presented by databases (and raft members, which are both).
	Server Usage = 1 << iota
	// Client certificates are presented by whatever connects to a database.
	Client
)

// clockSkew backdates every certificate, so that a node whose clock is slightly behind the
// issuer's accepts it at once.
const clockSkew = 5 * time.Minute

// CA is a certificate authority: its certificate and the key that signs with it.
type CA struct {
	Cert *x509.Certificate
	Key  crypto.Signer
	// CertPEM is Cert, PEM-encoded: what clients and servers are given to trust.
	CertPEM []byte
}

// NewCA makes a self-signed CA named cn, valid for validity from now.
func NewCA(cn string, validity time.Duration) (*CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	serial, err := newSerial()
	if err != nil {
		return nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{SerialNumber: serial, Subject: pkix.Name{CommonName: cn},
		NotBefore: now.Add(-clockSkew), NotAfter: now.Add(validity),
		IsCA: true, BasicConstraintsValid: true, MaxPathLenZero: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageCRLSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &CA{Cert: cert, Key: key, CertPEM: encode("CERTIFICATE", der)}, nil
}

// LoadCA reads a CA from its PEM certificate and key (as KeyPEM writes it).
func LoadCA(certPEM, keyPEM []byte) (*CA, error) {
	cert, err := ParseCertificate(certPEM)
	if err != nil {
		return nil, fmt.Errorf("CA certificate: %w", err)
	}
	if !cert.IsCA {
		return nil, fmt.Errorf("certificate %q is not a CA", cert.Subject.CommonName)
	}
	key, err := ParseKey(keyPEM)
	if err != nil {
		return nil, fmt.Errorf("CA key: %w", err)
	}
	pub, ok := key.Public().(*ecdsa.PublicKey)
	if !ok || !pub.Equal(cert.PublicKey) {
		return nil, errors.New("the CA key does not match the CA certificate")
	}
	return &CA{Cert: cert, Key: key, CertPEM: certPEM}, nil
}

// KeyPEM is the CA's key, PEM-encoded (for the Secret that keeps it).
func (ca *CA) KeyPEM() ([]byte, error) {
	return marshalKey(ca.Key)
}

// Request describes a certificate to issue.
type Request struct {
	// CommonName is the identity: a component ("kovn-controller"), a chassis (the node name,
	// which SB RBAC matches) or an availability zone.
	CommonName string
	// DNSNames and IPs are the names and addresses clients dial the holder at (servers).
	DNSNames []string
	IPs      []netip.Addr
	Usage    Usage
	Validity time.Duration
}

func (r Request) validate() error {
	switch {
	case r.CommonName == "":
		return errors.New("certificate request without a common name")
	case r.Usage&(Server|Client) == 0:
		return fmt.Errorf("certificate request %q: no usage (server, client or both)", r.CommonName)
	case r.Validity <= 0:
		return fmt.Errorf("certificate request %q: validity %s is not positive", r.CommonName, r.Validity)
	case r.Usage&Server != 0 && len(r.DNSNames) == 0 && len(r.IPs) == 0:
		return fmt.Errorf("server certificate %q names no address or DNS name its clients could verify", r.CommonName)
	}
	return nil
}

// Issue makes a key and a certificate for r, signed by the CA, both PEM-encoded. The
// certificate never outlives the CA.
func (ca *CA) Issue(r Request) (certPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	certPEM, err = ca.Sign(&key.PublicKey, r)
	if err != nil {
		return nil, nil, err
	}
	keyPEM, err = marshalKey(key)
	return certPEM, keyPEM, err
}

// Sign certifies pub (a key the holder made itself, as a node does for its chassis
// certificate) for r.
func (ca *CA) Sign(pub crypto.PublicKey, r Request) ([]byte, error) {
	if err := r.validate(); err != nil {
		return nil, err
	}
	serial, err := newSerial()
	if err != nil {
		return nil, err
	}
	now := time.Now()
	notAfter := now.Add(r.Validity)
	if notAfter.After(ca.Cert.NotAfter) {
		notAfter = ca.Cert.NotAfter
	}
	tmpl := &x509.Certificate{SerialNumber: serial, Subject: pkix.Name{CommonName: r.CommonName},
		NotBefore: now.Add(-clockSkew), NotAfter: notAfter, DNSNames: r.DNSNames,
		KeyUsage: x509.KeyUsageDigitalSignature, BasicConstraintsValid: true}
	for _, ip := range r.IPs {
		tmpl.IPAddresses = append(tmpl.IPAddresses, net.IP(ip.AsSlice()))
	}
	if r.Usage&Server != 0 {
		tmpl.ExtKeyUsage = append(tmpl.ExtKeyUsage, x509.ExtKeyUsageServerAuth)
	}
	if r.Usage&Client != 0 {
		tmpl.ExtKeyUsage = append(tmpl.ExtKeyUsage, x509.ExtKeyUsageClientAuth)
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, pub, ca.Key)
	if err != nil {
		return nil, err
	}
	return encode("CERTIFICATE", der), nil
}

// RenewalDue reports whether cert has passed half of its lifetime at now (or is not valid
// yet): renewing then leaves the other half for a renewal that failed to be retried.
func RenewalDue(cert *x509.Certificate, now time.Time) bool {
	return !now.Before(RenewalTime(cert)) || now.Before(cert.NotBefore)
}

// RenewalTime is half-way through cert's life, when kovn renews it.
func RenewalTime(cert *x509.Certificate) time.Time {
	return cert.NotBefore.Add(cert.NotAfter.Sub(cert.NotBefore) / 2)
}

// ParseCertificate reads the first certificate of a PEM bundle.
func ParseCertificate(certPEM []byte) (*x509.Certificate, error) {
	for rest := certPEM; ; {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			return nil, errors.New("no PEM certificate found")
		}
		if b.Type == "CERTIFICATE" {
			return x509.ParseCertificate(b.Bytes)
		}
	}
}

// ParseKey reads a PEM private key (PKCS#8 or SEC 1 EC).
func ParseKey(keyPEM []byte) (crypto.Signer, error) {
	b, _ := pem.Decode(keyPEM)
	if b == nil {
		return nil, errors.New("no PEM private key found")
	}
	if k, err := x509.ParsePKCS8PrivateKey(b.Bytes); err == nil {
		if s, ok := k.(crypto.Signer); ok {
			return s, nil
		}
		return nil, fmt.Errorf("private key of type %T cannot sign", k)
	}
	return x509.ParseECPrivateKey(b.Bytes)
}

func marshalKey(key crypto.Signer) ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, err
	}
	return encode("PRIVATE KEY", der), nil
}

func encode(typ string, der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der})
}

// newSerial is a random 128-bit serial number, unique without a counter to keep.
func newSerial() (*big.Int, error) {
	return rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 128))
}
