package ovn_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/kovn/kovn/pkg/ovn"
	"github.com/kovn/kovn/pkg/ovn/model/nb"
	"github.com/kovn/kovn/pkg/ovn/ovntest"
)

// TestTLSProxy: a client without a certificate reaches a database that requires one through
// the proxy's unix socket (the proxy presents its own), past a member that does not answer;
// with a certificate the database does not trust, nothing gets through.
func TestTLSProxy(t *testing.T) {
	ca := newPKI(t, "ovn ca")
	member := serveTLS(t, ca, ovntest.ServeNB(t))
	dir := t.TempDir()
	certPEM, keyPEM := ca.issue(t, "kovn-ovn-central")
	cfg := ovn.Config{Endpoints: []string{"ssl:127.0.0.1:1", member},
		Cert: writeFile(t, dir, "tls.crt", certPEM), Key: writeFile(t, dir, "tls.key", keyPEM), CACert: writeFile(t, dir, "ca.crt", ca.pem)}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sock := filepath.Join(dir, "nb.sock")
	go func() { _ = (&ovn.TLSProxy{Config: cfg, Socket: sock}).Serve(ctx) }()
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if _, err := os.Stat(sock); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the proxy's socket did not appear")
		}
	}
	connectCtx, cancelConnect := context.WithTimeout(ctx, 10*time.Second)
	defer cancelConnect()
	c, err := ovn.ConnectNB(connectCtx, fastCfg("unix:"+sock))
	if err != nil {
		t.Fatalf("NB through the proxy: %v", err)
	}
	var rows []nb.LogicalSwitch
	if err := c.List(connectCtx, &rows); err != nil {
		t.Fatal(err)
	}
	c.Close()

	// The proxy's certificate from another CA: the member refuses every connection.
	other := newPKI(t, "other ca")
	certPEM, keyPEM = other.issue(t, "kovn-ovn-central")
	bad := ovn.Config{Endpoints: []string{member}, Cert: writeFile(t, dir, "bad.crt", certPEM),
		Key: writeFile(t, dir, "bad.key", keyPEM), CACert: writeFile(t, dir, "ca2.crt", ca.pem)}
	badSock := filepath.Join(dir, "bad.sock")
	go func() { _ = (&ovn.TLSProxy{Config: bad, Socket: badSock}).Serve(ctx) }()
	shortCtx, cancelShort := context.WithTimeout(ctx, time.Second)
	defer cancelShort()
	if _, err := ovn.ConnectNB(shortCtx, fastCfg("unix:"+badSock)); err == nil {
		t.Fatal("NB answered through a proxy whose certificate it does not trust")
	}
}
