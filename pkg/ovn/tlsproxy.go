package ovn

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
)

// TLSProxy serves OVSDB clients that cannot present the certificate a database trusts on a
// unix socket, relaying each connection byte for byte to the database's members over TLS with
// Config's certificate. ovn-ic needs it: it has one TLS identity for all its databases (the
// AZ's clusterset certificate), which the cluster's NB does not trust.
//
// Each new connection goes to the next member in turn (skipping one that does not answer), and
// the client reads that member's own _Server database through it: a client that wants the raft
// leader (OVS's default) drops a follower and reconnects until it reaches the leader, as with
// the members' own addresses. An ovsdb-server relay cannot stand in: such clients refuse it.
type TLSProxy struct {
	// Config names the members (ssl:IP:PORT) and the certificate (files, reloaded when they
	// change, or Credentials).
	Config Config
	// Socket is the unix socket to serve.
	Socket string
	Log    logr.Logger

	mu   sync.Mutex
	next int
}

// Serve listens on Socket until ctx ends.
func (p *TLSProxy) Serve(ctx context.Context) error {
	tlsCfg, err := p.Config.tlsConfig()
	if err != nil {
		return err
	}
	if tlsCfg == nil {
		return errors.New("tls proxy: no certificate configured")
	}
	var members []string
	for _, ep := range p.Config.Endpoints {
		hostPort, ok := strings.CutPrefix(ep, "ssl:")
		if _, err := validateEndpoint(ep); err != nil || !ok {
			return fmt.Errorf("tls proxy: member %q is not ssl:IP:PORT", ep)
		}
		members = append(members, hostPort)
	}
	if len(members) == 0 {
		return errors.New("tls proxy: no members")
	}
	_ = os.Remove(p.Socket) // a socket left by an earlier run
	ln, err := net.Listen("unix", p.Socket)
	if err != nil {
		return err
	}
	go func() { <-ctx.Done(); _ = ln.Close() }()
	for {
		conn, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		go p.relay(ctx, conn, members, tlsCfg)
	}
}

// relay connects conn to the next member that answers and copies both ways until one side ends.
func (p *TLSProxy) relay(ctx context.Context, conn net.Conn, members []string, tlsCfg *tls.Config) {
	defer conn.Close()
	p.mu.Lock()
	first := p.next
	p.next++
	p.mu.Unlock()
	var up net.Conn
	for i := range members {
		member := members[(first+i)%len(members)]
		d := tls.Dialer{NetDialer: &net.Dialer{Timeout: 5 * time.Second}, Config: tlsCfg}
		c, err := d.DialContext(ctx, "tcp", member)
		if err == nil {
			up = c
			break
		}
		p.Log.Info("tls proxy: member unreachable", "member", member, "error", err.Error())
	}
	if up == nil {
		return
	}
	defer up.Close()
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(up, conn); done <- struct{}{} }()
	go func() { _, _ = io.Copy(conn, up); done <- struct{}{} }()
	select {
	case <-done:
	case <-ctx.Done():
	}
}
