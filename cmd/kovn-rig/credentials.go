package main

import (
	"context"
	"flag"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/kovn/kovn/pkg/interconnect/ictls"
	"github.com/kovn/kovn/test/rig"
)

// credentials is the rig's internal `kovn-rig credentials` step: it gives kovn-controller or a
// kovn-daemon its ServiceAccount kubeconfig (see rig.Credentials).
func credentials(args []string) error {
	fs := flag.NewFlagSet("credentials", flag.ExitOnError)
	var cr rig.Credentials
	fs.StringVar(&cr.AdminKubeconfig, "admin-kubeconfig", "", "admin kubeconfig used to apply objects and request tokens")
	fs.StringVar(&cr.ServiceAccount, "service-account", "", "ServiceAccount in "+rig.KovnNamespace+" to mint a token for")
	fs.StringVar(&cr.Node, "node", "", "bind the token to this Node (waits until it is registered)")
	fs.StringVar(&cr.ApplyChartWith, "apply-chart-with", "", "first apply the ServiceAccounts, RBAC and policies of kovn's chart, rendered by this helm binary")
	fs.StringVar(&cr.ClustersetTLSDir, "clusterset-tls-dir", "", "also apply the Secret "+ictls.DefaultSecretName+" (this AZ's clusterset certificate) from this directory's tls.crt, tls.key and ca.crt")
	fs.DurationVar(&cr.Lifetime, "lifetime", 24*time.Hour, "requested token lifetime")
	fs.StringVar(&cr.Out, "out", "", "kubeconfig to write (the token goes beside it, OUT.token)")
	renew := fs.Bool("renew", false, "keep running and renew the token at 80% of its lifetime")
	_ = fs.Parse(args)
	if cr.AdminKubeconfig == "" || cr.ServiceAccount == "" || cr.Out == "" {
		fs.Usage()
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if !*renew {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, 2*time.Minute)
		defer cancel()
	}
	return cr.Run(ctx, *renew)
}
