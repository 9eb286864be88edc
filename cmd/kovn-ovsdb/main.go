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
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/go-logr/stdr"

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
	if len(rest) < 3 || rest[0] != "dump" {
		return fmt.Errorf("usage: kovn-ovsdb [flags] dump DATABASE ENDPOINTS [TABLE...] (DATABASE: nb, sb, ic-nb, ic-sb, ovs) | kovn-ovsdb [flags] tls-proxy SOCKET ENDPOINTS")
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
