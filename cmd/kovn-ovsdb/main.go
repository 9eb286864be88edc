// kovn-ovsdb reads an OVSDB database through libovsdb and prints its rows as JSON. It is what
// `kubectl kovn` runs in the chart's pods to read OVN NB/SB, the IC databases and a node's
// Open_vSwitch database, whose unix sockets only those pods reach:
//
//	kovn-ovsdb dump DATABASE ENDPOINTS [TABLE...]
//
// DATABASE is nb, sb, ic-nb, ic-sb or ovs; ENDPOINTS is OVN's syntax ("unix:/path",
// "tcp:IP:PORT", comma-separated for a raft cluster). The output is one JSON object: table ->
// rows, each row kovn's generated model (pkg/ovn/model), so readers decode typed rows.
//
//	kovn-ovsdb -cert F -key F -cacert F tls-proxy SOCKET ENDPOINTS
//
// serves SOCKET (a unix socket) and relays each connection to the next member of ENDPOINTS
// (ssl:IP:PORT, comma-separated) with that certificate (ovn.TLSProxy): the chart's ovn-ic
// reaches NB through it, since its own certificate is the AZ's, which NB does not trust.
//
//	kovn-ovsdb -cert F -key F -cacert F ic-authz LISTEN SOCKET
//
// serves LISTEN (IP:PORT) with mutual TLS in front of the IC-SB server at SOCKET (its unix
// socket) and lets each AZ's certificate write only its own AZ's rows of OVN_IC_Southbound and
// OVN_ClusterSet (icauthz.Relay): the server itself listens on its unix socket (and its raft
// port) only.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"net"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/go-logr/stdr"

	"github.com/kovn/kovn/pkg/interconnect/icauthz"
	"github.com/kovn/kovn/pkg/ovn"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "kovn-ovsdb:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	fs := flag.NewFlagSet("kovn-ovsdb", flag.ContinueOnError)
	timeout := fs.Duration("timeout", 10*time.Second, "give up reading after this long")
	cert := fs.String("cert", "", "client certificate (PEM), for ssl: endpoints")
	key := fs.String("key", "", "client key (PEM)")
	ca := fs.String("cacert", "", "CA certificate (PEM)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	rest := fs.Args()
	if len(rest) == 3 && rest[0] == "tls-proxy" {
		ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
		defer stop()
		p := &ovn.TLSProxy{Socket: rest[1], Config: ovn.Config{Endpoints: ovn.SplitEndpoints(rest[2]), Cert: *cert, Key: *key, CACert: *ca},
			Log: stdr.New(log.New(os.Stderr, "", log.LstdFlags))}
		return p.Serve(ctx)
	}
	if len(rest) == 3 && rest[0] == "ic-authz" {
		return serveICAuthz(rest[1], rest[2], ovn.FileCredentials(*cert, *key, *ca))
	}
	if len(rest) < 3 || rest[0] != "dump" {
		return fmt.Errorf("usage: kovn-ovsdb [flags] dump DATABASE ENDPOINTS [TABLE...] (DATABASE: nb, sb, ic-nb, ic-sb, ovs) | kovn-ovsdb [flags] tls-proxy SOCKET ENDPOINTS | kovn-ovsdb [flags] ic-authz LISTEN SOCKET")
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	cfg := ovn.Config{Endpoints: ovn.SplitEndpoints(rest[2]), Cert: *cert, Key: *key, CACert: *ca,
		ConnectTimeout: *timeout / 2, RetryInterval: 200 * time.Millisecond, MaxRetryInterval: time.Second}
	rows, err := ovn.Dump(ctx, rest[1], cfg, rest[3:]...)
	if err != nil {
		return err
	}
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", " ")
	return enc.Encode(rows)
}

// serveICAuthz runs the IC-SB authorizing relay until SIGTERM.
func serveICAuthz(listen, socket string, creds ovn.CredentialSource) error {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if _, _, err := creds.Load(); err != nil {
		return err
	}
	logger := stdr.New(log.New(os.Stderr, "", log.LstdFlags))
	view, err := icauthz.ConnectView(ctx, "unix:"+socket)
	if err != nil {
		return err
	}
	if i := strings.LastIndex(listen, ":"); i > 0 && strings.Count(listen, ":") > 1 && !strings.HasPrefix(listen, "[") {
		listen = net.JoinHostPort(listen[:i], listen[i+1:]) // an IPv6 address as a pod's IP gives it
	}
	r := &icauthz.Relay{Listen: listen, Upstream: socket, Credentials: creds, View: view, Log: logger}
	logger.Info("serving IC-SB with per-AZ authorization", "listen", listen, "server", socket)
	return r.Serve(ctx)
}
