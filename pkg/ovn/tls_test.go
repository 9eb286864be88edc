package ovn_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kovn/kovn/pkg/ovn"
	"github.com/kovn/kovn/pkg/ovn/ovntest"
)

// pki is a CA with a function to issue certificates, like ovs-pki's.
type pki struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte
}

func newPKI(t *testing.T, name string) *pki {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	return &pki{cert: cert, key: key, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

// issue returns PEM certificate and key for cn. Like OVN's PKI certificates they carry no
// IP SAN, so only chain verification (not host name verification) can accept them.
func (p *pki) issue(t *testing.T, cn string) (certPEM, keyPEM []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, p.cert, &key.PublicKey, p.key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})
}

func writeFile(t *testing.T, dir, name string, data []byte) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// serveTLS terminates TLS (client certificates required, as ovsdb-server does) on a
// loopback port and forwards to the in-memory server's unix socket.
func serveTLS(t *testing.T, ca *pki, unixEndpoint string) string {
	t.Helper()
	certPEM, keyPEM := ca.issue(t, "ovnnb")
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	clientCAs := x509.NewCertPool()
	clientCAs.AddCert(ca.cert)
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{cert},
		ClientCAs: clientCAs, ClientAuth: tls.RequireAndVerifyClientCert})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer conn.Close()
				backend, err := net.Dial("unix", strings.TrimPrefix(unixEndpoint, "unix:"))
				if err != nil {
					return
				}
				defer backend.Close()
				go func() { _, _ = io.Copy(backend, conn) }()
				_, _ = io.Copy(conn, backend)
			}()
		}
	}()
	return "ssl:" + ln.Addr().String()
}

func TestConnectSSL(t *testing.T) {
	ca := newPKI(t, "ovn ca")
	endpoint := serveTLS(t, ca, ovntest.ServeNB(t))
	dir := t.TempDir()
	certPEM, keyPEM := ca.issue(t, "kovn-controller")
	cfg := fastCfg(endpoint)
	cfg.Cert = writeFile(t, dir, "cert.pem", certPEM)
	cfg.Key = writeFile(t, dir, "key.pem", keyPEM)
	cfg.CACert = writeFile(t, dir, "ca.pem", ca.pem)

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := ovn.ConnectNB(ctx, cfg)
	if err != nil {
		t.Fatalf("ConnectNB over ssl with the right CA: %v", err)
	}
	c.Close()

	// A server certificate from another CA must be refused.
	cfg.CACert = writeFile(t, dir, "other-ca.pem", newPKI(t, "other ca").pem)
	ctx2, cancel2 := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel2()
	if _, err := ovn.ConnectNB(ctx2, cfg); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("ConnectNB over ssl with the wrong CA = %v, want a certificate error", err)
	}

	// Unreadable files are reported before any connection attempt.
	cfg.CACert = filepath.Join(dir, "missing.pem")
	if _, err := ovn.ConnectNB(context.Background(), cfg); err == nil || !strings.Contains(err.Error(), "CA certificate") {
		t.Fatalf("ConnectNB with a missing CA file = %v, want a CA file error", err)
	}
}

// TestConnectSSLCredentials: certificates held in memory (a Secret's) connect; a broken set
// keeps the last good one, so the next connection still succeeds; before any good set the
// connection fails with a certificate error, never falls back to plain TCP.
func TestConnectSSLCredentials(t *testing.T) {
	ca := newPKI(t, "ovn ca")
	endpoint := serveTLS(t, ca, ovntest.ServeNB(t))
	cfg := fastCfg(endpoint)
	creds := &ovn.Credentials{}
	cfg.Credentials = creds

	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	if _, err := ovn.ConnectNB(ctx, cfg); err == nil {
		t.Fatal("ConnectNB before any credentials were set succeeded")
	}
	certPEM, keyPEM := ca.issue(t, "az1")
	if err := creds.Set(certPEM, keyPEM, []byte("not a PEM")); err == nil || !strings.Contains(err.Error(), "CA bundle") {
		t.Fatalf("Set with a bad CA bundle = %v, want a CA bundle error", err)
	}
	if _, _, err := creds.Load(); err == nil || !strings.Contains(err.Error(), "CA bundle") {
		t.Fatalf("Load with nothing good set = %v, want the last error", err)
	}
	if err := creds.Set(certPEM, keyPEM, ca.pem); err != nil {
		t.Fatal(err)
	}
	if err := creds.Set(certPEM, []byte("garbage"), ca.pem); err == nil {
		t.Fatal("Set with a bad key succeeded")
	}
	ctx2, cancel2 := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel2()
	c, err := ovn.ConnectNB(ctx2, cfg)
	if err != nil {
		t.Fatalf("ConnectNB with the last good credentials: %v", err)
	}
	c.Close()
}
