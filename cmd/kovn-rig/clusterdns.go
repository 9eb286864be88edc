package main

import (
	"context"
	"flag"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/kovn/kovn/test/rig"
)

// clusterDNS is the rig's internal `kovn-rig cluster-dns` step: it applies the objects that run
// cluster DNS (see rig.DNSObjects) and exits; the Deployment becomes Ready on its own.
func clusterDNS(args []string) error {
	fs := flag.NewFlagSet("cluster-dns", flag.ExitOnError)
	admin := fs.String("admin-kubeconfig", "", "admin kubeconfig used to apply the objects")
	ips := fs.String("cluster-ips", "", "the kube-dns Service's ClusterIPs, comma-separated, primary first")
	_ = fs.Parse(args)
	if *admin == "" || *ips == "" {
		fs.Usage()
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, 80*time.Second)
	defer cancel()
	return rig.ApplyDNS(ctx, *admin, strings.Split(*ips, ","))
}
