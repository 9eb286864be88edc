package icauthz

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"sync"
	"time"

	"github.com/go-logr/logr"

	"github.com/kovn/kovn/pkg/ovn"
)

// Relay serves the IC-SB server's clients on Listen with mutual TLS and relays each
// connection to the server's unix socket, authorizing every transact (Authorize).
type Relay struct {
	// Listen is the address the clients dial (IP:PORT).
	Listen string
	// Upstream is the IC-SB server's unix socket.
	Upstream string
	// Credentials are the relay's server certificate and the CA its clients chain to, read
	// again before each handshake (renewals and CA changes need no restart).
	Credentials ovn.CredentialSource
	View        View
	Log         logr.Logger
}

// Serve accepts clients until ctx ends.
func (r *Relay) Serve(ctx context.Context) error {
	ln, err := net.Listen("tcp", r.Listen)
	if err != nil {
		return err
	}
	return r.ServeListener(ctx, ln)
}

// ServeListener is Serve on ln.
func (r *Relay) ServeListener(ctx context.Context, ln net.Listener) error {
	go func() { <-ctx.Done(); _ = ln.Close() }()
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, GetConfigForClient: r.tlsConfig}
	for {
		conn, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		go r.serve(ctx, tls.Server(conn, cfg))
	}
}

// tlsConfig is the configuration of one handshake, with the credentials as they are now.
func (r *Relay) tlsConfig(*tls.ClientHelloInfo) (*tls.Config, error) {
	pair, roots, err := r.Credentials.Load()
	if err != nil {
		return nil, err
	}
	return &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{*pair},
		ClientCAs: roots, ClientAuth: tls.RequireAndVerifyClientCert}, nil
}

// identity is what a verified client certificate may act for: its CN, then its DNS names.
func identity(state tls.ConnectionState) (Identity, error) {
	if len(state.PeerCertificates) == 0 {
		return Identity{}, errors.New("no client certificate")
	}
	leaf := state.PeerCertificates[0]
	if leaf.Subject.CommonName == "" {
		return Identity{}, errors.New("a client certificate without a common name")
	}
	names := []string{leaf.Subject.CommonName}
	for _, n := range leaf.DNSNames {
		if !slices.Contains(names, n) {
			names = append(names, n)
		}
	}
	return Identity{Names: names}, nil
}

func (r *Relay) serve(ctx context.Context, conn *tls.Conn) {
	defer func() { _ = conn.Close() }()
	hctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	err := conn.HandshakeContext(hctx)
	cancel()
	if err != nil {
		r.Log.V(1).Info("handshake failed", "client", conn.RemoteAddr().String(), "error", err.Error())
		return
	}
	id, err := identity(conn.ConnectionState())
	if err != nil {
		r.Log.Info("client refused", "client", conn.RemoteAddr().String(), "error", err.Error())
		return
	}
	var d net.Dialer
	up, err := d.DialContext(ctx, "unix", r.Upstream)
	if err != nil {
		r.Log.Info("IC-SB server unreachable", "socket", r.Upstream, "error", err.Error())
		return
	}
	defer up.Close()
	toClient := &lockedWriter{w: conn}
	done := make(chan struct{}, 2)
	go func() { r.copyMessages(toClient, up); done <- struct{}{} }()
	go func() { r.fromClient(id, conn, up, toClient); done <- struct{}{} }()
	select {
	case <-done:
	case <-ctx.Done():
	}
}

// lockedWriter writes whole messages to the client: the server's and the relay's own
// refusals never interleave.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) write(msg []byte) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	_, err := l.w.Write(msg)
	return err
}

// copyMessages relays the server's messages to the client one whole message at a time.
func (r *Relay) copyMessages(to *lockedWriter, from io.Reader) {
	dec := json.NewDecoder(from)
	for {
		var msg json.RawMessage
		if err := dec.Decode(&msg); err != nil || to.write(msg) != nil {
			return
		}
	}
}

// message is a JSON-RPC message as far as the relay reads it.
type message struct {
	ID     json.RawMessage   `json:"id,omitempty"`
	Method string            `json:"method,omitempty"`
	Params []json.RawMessage `json:"params,omitempty"`
}

// fromClient relays the client's messages to the server, a transact only once authorized;
// a refused one is answered by the relay as the server answers a refused operation.
func (r *Relay) fromClient(id Identity, from io.Reader, up io.Writer, toClient *lockedWriter) {
	dec := json.NewDecoder(from)
	for {
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return
		}
		var m message
		if json.Unmarshal(raw, &m) == nil && m.Method == "transact" && len(m.Params) > 0 {
			out, err := r.authorize(id, m)
			if err != nil {
				if toClient.write(refusal(m, err)) != nil {
					return
				}
				continue
			}
			raw = out
		}
		if _, err := up.Write(raw); err != nil {
			return
		}
	}
}

func (r *Relay) authorize(id Identity, m message) ([]byte, error) {
	var db string
	if err := json.Unmarshal(m.Params[0], &db); err != nil {
		return nil, &Refusal{Reason: "a transact without a database name"}
	}
	ops, err := Authorize(db, id, r.View, m.Params[1:])
	if err != nil {
		r.Log.Info("transaction refused", "az", id.primary(), "names", id.Names, "database", db, "reason", err.Error())
		return nil, err
	}
	m.Params = append([]json.RawMessage{m.Params[0]}, ops...)
	return json.Marshal(m)
}

// refusal is the reply to a refused transact: the refused operation's result an OVSDB
// "permission error" (what OVN's RBAC answers), the operations after it not executed.
func refusal(m message, err error) []byte {
	results := make([]any, len(m.Params)-1)
	at := 0
	var ref *Refusal
	if errors.As(err, &ref) && ref.Op < len(results) {
		at = ref.Op
	}
	if len(results) == 0 {
		results = make([]any, 1)
	}
	results[at] = map[string]string{"error": "permission error",
		"details": fmt.Sprintf("kovn's IC-SB relay: %v", err)}
	return mustJSON(map[string]any{"id": m.ID, "result": results, "error": nil})
}
