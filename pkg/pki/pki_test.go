package pki

import (
	"crypto/tls"
	"crypto/x509"
	"io"
	"net/netip"
	"strings"
	"testing"
	"time"
)

func mustCA(t *testing.T, cn string, validity time.Duration) *CA {
	t.Helper()
	ca, err := NewCA(cn, validity)
	if err != nil {
		t.Fatal(err)
	}
	return ca
}

func mustIssue(t *testing.T, ca *CA, r Request) tls.Certificate {
	t.Helper()
	certPEM, keyPEM, err := ca.Issue(r)
	if err != nil {
		t.Fatal(err)
	}
	c, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// handshake runs one mutual TLS handshake on loopback: the server presents server and
// requires a client certificate from serverTrusts; the client presents client and verifies the
// server against clientTrusts as 127.0.0.1. It returns the client's error, then the server's.
func handshake(t *testing.T, server, client tls.Certificate, serverTrusts, clientTrusts *CA) (clientErr, serverErr error) {
	t.Helper()
	pool := func(ca *CA) *x509.CertPool {
		p := x509.NewCertPool()
		p.AddCert(ca.Cert)
		return p
	}
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{server},
		ClientCAs: pool(serverTrusts), ClientAuth: tls.RequireAndVerifyClientCert, MinVersion: tls.VersionTLS12})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	done := make(chan error, 1)
	go func() {
		conn, err := ln.Accept()
		if err != nil {
			done <- err
			return
		}
		defer conn.Close()
		err = conn.(*tls.Conn).Handshake()
		if err == nil { // a TLS 1.3 client learns of a refused certificate on its first read
			_, err = conn.Write([]byte("ok"))
		}
		done <- err
	}()
	conn, err := tls.Dial("tcp", ln.Addr().String(), &tls.Config{Certificates: []tls.Certificate{client},
		RootCAs: pool(clientTrusts), ServerName: "127.0.0.1", MinVersion: tls.VersionTLS12})
	if err == nil {
		_, err = io.ReadFull(conn, make([]byte, 2))
		conn.Close()
	}
	return err, <-done
}

var (
	loopback  = []netip.Addr{netip.MustParseAddr("127.0.0.1")}
	serverReq = Request{CommonName: "ovnnb", IPs: loopback, Usage: Server, Validity: time.Hour}
	clientReq = Request{CommonName: "kovn-controller", Usage: Client, Validity: time.Hour}
)

// Certificates of one CA open a mutual TLS session verified by IP SAN; a client without the
// CA's signature, a server from another CA, a client-only certificate posing as a server and a
// server-only one posing as a client are each refused.
func TestMutualTLS(t *testing.T) {
	ca, other := mustCA(t, "kovn ca", time.Hour), mustCA(t, "other ca", time.Hour)
	server, client := mustIssue(t, ca, serverReq), mustIssue(t, ca, clientReq)
	if cErr, sErr := handshake(t, server, client, ca, ca); cErr != nil || sErr != nil {
		t.Fatalf("same CA: client %v, server %v", cErr, sErr)
	}
	for _, tc := range []struct {
		what           string
		server, client tls.Certificate
		clientTrusts   *CA
	}{
		{"client from another CA", server, mustIssue(t, other, clientReq), ca},
		{"server from another CA", mustIssue(t, other, serverReq), client, ca},
		{"client-only certificate as the server", mustIssue(t, ca, Request{CommonName: "ovnnb", IPs: loopback, Usage: Client, Validity: time.Hour}), client, ca},
		{"server-only certificate as the client", server, mustIssue(t, ca, Request{CommonName: "x", IPs: loopback, Usage: Server, Validity: time.Hour}), ca},
		{"server without the dialled address", mustIssue(t, ca, Request{CommonName: "ovnnb", DNSNames: []string{"ovn-nb"}, Usage: Server, Validity: time.Hour}), client, ca},
	} {
		cErr, sErr := handshake(t, tc.server, tc.client, ca, tc.clientTrusts)
		if cErr == nil && sErr == nil {
			t.Errorf("%s: accepted", tc.what)
		}
	}
}

func TestIssueBounds(t *testing.T) {
	ca := mustCA(t, "kovn ca", time.Hour)
	certPEM, _, err := ca.Issue(Request{CommonName: "c1-n1", Usage: Client | Server, IPs: loopback, Validity: 24 * time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	cert, err := ParseCertificate(certPEM)
	if err != nil {
		t.Fatal(err)
	}
	if cert.NotAfter.After(ca.Cert.NotAfter) {
		t.Errorf("certificate valid until %s, after its CA (%s)", cert.NotAfter, ca.Cert.NotAfter)
	}
	if cert.Subject.CommonName != "c1-n1" || len(cert.ExtKeyUsage) != 2 {
		t.Errorf("CN %q, EKUs %v", cert.Subject.CommonName, cert.ExtKeyUsage)
	}
	for _, bad := range []Request{
		{Usage: Client, Validity: time.Hour},
		{CommonName: "x", Validity: time.Hour},
		{CommonName: "x", Usage: Client},
		{CommonName: "x", Usage: Server, Validity: time.Hour},
	} {
		if _, _, err := ca.Issue(bad); err == nil {
			t.Errorf("request %+v issued", bad)
		}
	}
}

func TestLoadCA(t *testing.T) {
	ca := mustCA(t, "kovn ca", time.Hour)
	keyPEM, err := ca.KeyPEM()
	if err != nil {
		t.Fatal(err)
	}
	loaded, err := LoadCA(ca.CertPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	server := mustIssue(t, loaded, serverReq)
	if cErr, sErr := handshake(t, server, mustIssue(t, ca, clientReq), ca, ca); cErr != nil || sErr != nil {
		t.Fatalf("certificate of the reloaded CA: client %v, server %v", cErr, sErr)
	}
	otherKey, _ := mustCA(t, "other", time.Hour).KeyPEM()
	if _, err := LoadCA(ca.CertPEM, otherKey); err == nil || !strings.Contains(err.Error(), "does not match") {
		t.Errorf("CA with another CA's key: %v", err)
	}
	leaf, _, _ := ca.Issue(clientReq)
	if _, err := LoadCA(leaf, keyPEM); err == nil {
		t.Error("a leaf certificate loaded as a CA")
	}
	if _, err := LoadCA([]byte("junk"), keyPEM); err == nil {
		t.Error("junk loaded as a CA")
	}
}

func TestRenewalDue(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	cert := &x509.Certificate{NotBefore: start, NotAfter: start.Add(24 * time.Hour)}
	for _, tc := range []struct {
		at   time.Duration
		want bool
	}{{-time.Minute, true}, {0, false}, {11 * time.Hour, false}, {12 * time.Hour, true}, {30 * time.Hour, true}} {
		if got := RenewalDue(cert, start.Add(tc.at)); got != tc.want {
			t.Errorf("at %s: due %t, want %t", tc.at, got, tc.want)
		}
	}
}
