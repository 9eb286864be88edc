// kovn-probe is what `kubectl kovn connectivity-test` runs in its pods:
//
//	kovn-probe serve --name CLUSTER/POD      answer HTTP on :8080 with the name
//	kovn-probe check --from CLUSTER/POD --targets JSON   probe each target, one JSON result per line
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/kovn/kovn/pkg/kovnctl/probe"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "kovn-probe:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	if len(args) == 0 {
		return fmt.Errorf("usage: kovn-probe serve|check [flags]")
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	fs := flag.NewFlagSet(args[0], flag.ContinueOnError)
	switch args[0] {
	case "serve":
		name := fs.String("name", "", "what to answer")
		port := fs.Int("port", probe.Port, "HTTP port")
		if err := fs.Parse(args[1:]); err != nil {
			return err
		}
		return probe.Serve(ctx, fmt.Sprintf(":%d", *port), *name)
	case "check":
		from := fs.String("from", "", "this pod, as cluster/name")
		targets := fs.String("targets", "[]", "the checks, JSON")
		if err := fs.Parse(args[1:]); err != nil {
			return err
		}
		var ts []probe.Target
		if err := json.NewDecoder(strings.NewReader(*targets)).Decode(&ts); err != nil {
			return fmt.Errorf("--targets: %w", err)
		}
		return probe.CheckAll(ctx, os.Stdout, *from, ts)
	}
	return fmt.Errorf("unknown command %q: serve or check", args[0])
}
