package ovn

import (
	"crypto/tls"
	"crypto/x509"
	"net/netip"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/kovn/kovn/pkg/pki"
)

// TestTLSFilesReload: a client's certificate and CA bundle renewed on disk are used by its next
// handshake with no new Config (a reconnect), a half-written pair keeps the last good one, and
// a server from a CA not (yet) in the bundle is refused.
func TestTLSFilesReload(t *testing.T) {
	oldCA, err := pki.NewCA("kovn ca 1", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	newCA, err := pki.NewCA("kovn ca 2", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	write := func(name string, data []byte) string {
		t.Helper()
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p+".tmp", data, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(p+".tmp", p); err != nil {
			t.Fatal(err)
		}
		// Renewals within one timestamp tick must still be seen.
		when := time.Now().Add(time.Duration(len(data)) * time.Millisecond)
		_ = os.Chtimes(p, when, when)
		return p
	}
	issue := func(ca *pki.CA, r pki.Request) (certPEM, keyPEM []byte) {
		t.Helper()
		c, k, err := ca.Issue(r)
		if err != nil {
			t.Fatal(err)
		}
		return c, k
	}
	client := func(ca *pki.CA, cn string) {
		c, k := issue(ca, pki.Request{CommonName: cn, Usage: pki.Client, Validity: time.Hour})
		write("cert.pem", c)
		write("key.pem", k)
	}
	client(oldCA, "kovn-controller-1")
	caFile := write("ca.pem", oldCA.CertPEM)
	cfg, err := Config{Endpoints: []string{"ssl:127.0.0.1:1"}, Cert: filepath.Join(dir, "cert.pem"),
		Key: filepath.Join(dir, "key.pem"), CACert: caFile}.tlsConfig()
	if err != nil {
		t.Fatal(err)
	}

	// A server trusting both CAs, presenting a certificate of either.
	both := x509.NewCertPool()
	both.AddCert(oldCA.Cert)
	both.AddCert(newCA.Cert)
	serverOf := func(ca *pki.CA) tls.Certificate {
		c, k := issue(ca, pki.Request{CommonName: "ovnsb", IPs: []netip.Addr{netip.MustParseAddr("127.0.0.1")}, Usage: pki.Server, Validity: time.Hour})
		pair, err := tls.X509KeyPair(c, k)
		if err != nil {
			t.Fatal(err)
		}
		return pair
	}
	dial := func(server tls.Certificate) (string, error) {
		t.Helper()
		ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{server},
			ClientCAs: both, ClientAuth: tls.RequireAndVerifyClientCert})
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		seen := make(chan string, 1)
		go func() {
			conn, err := ln.Accept()
			if err != nil {
				seen <- ""
				return
			}
			defer conn.Close()
			tc := conn.(*tls.Conn)
			if tc.Handshake() != nil || len(tc.ConnectionState().PeerCertificates) == 0 {
				seen <- ""
				return
			}
			_, _ = tc.Write([]byte("k"))
			seen <- tc.ConnectionState().PeerCertificates[0].Subject.CommonName
		}()
		conn, err := tls.Dial("tcp", ln.Addr().String(), cfg)
		if err == nil {
			_, err = conn.Read(make([]byte, 1))
			conn.Close()
		}
		return <-seen, err
	}

	if cn, err := dial(serverOf(oldCA)); err != nil || cn != "kovn-controller-1" {
		t.Fatalf("first connection: client %q, %v", cn, err)
	}
	if _, err := dial(serverOf(newCA)); err == nil {
		t.Fatal("a server of a CA not in the bundle was accepted")
	}
	client(newCA, "kovn-controller-2")
	write("ca.pem", append(append([]byte{}, oldCA.CertPEM...), newCA.CertPEM...))
	if cn, err := dial(serverOf(newCA)); err != nil || cn != "kovn-controller-2" {
		t.Fatalf("after renewal: client %q, %v; want the new certificate and the new CA trusted", cn, err)
	}
	// The certificate renewed but its key not yet: the last good pair stays in use.
	c, _ := issue(oldCA, pki.Request{CommonName: "kovn-controller-3", Usage: pki.Client, Validity: time.Hour})
	write("cert.pem", c)
	if cn, err := dial(serverOf(oldCA)); err != nil || cn != "kovn-controller-2" {
		t.Fatalf("half-written pair: client %q, %v; want the last good pair", cn, err)
	}
}
