// kubectl-kovn is kovn's kubectl plugin: `kubectl kovn status` says what is wrong with kovn in
// a cluster and why, for people (tables) and scripts (-o json); connectivity-test probes every
// path; trace, tcpdump, diagnose and gather run OVS and OVN tools in the chart's pods.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kovn/kovn/pkg/kovnctl"
)

// errProblems makes the exit status 1 when the report has problems (the report is printed).
var errProblems = errors.New("problems found")

func main() {
	if err := newRoot(os.Stdout).Execute(); err != nil {
		if !errors.Is(err, errProblems) && !errors.Is(err, errChecksFailed) {
			fmt.Fprintln(os.Stderr, "error:", err)
		}
		os.Exit(1)
	}
}

type globalFlags struct {
	kubeconfig, context, output string
}

func newRoot(out io.Writer) *cobra.Command {
	g := &globalFlags{}
	root := &cobra.Command{Use: "kubectl-kovn", Short: "Look at kovn in a cluster", SilenceUsage: true, SilenceErrors: true}
	root.PersistentFlags().StringVar(&g.kubeconfig, "kubeconfig", "", "kubeconfig file (default: $KUBECONFIG or ~/.kube/config)")
	root.PersistentFlags().StringVar(&g.context, "context", "", "kubeconfig context")
	root.PersistentFlags().StringVarP(&g.output, "output", "o", "table", "table or json")
	root.AddCommand(newStatus(g, out), newConnectivityTest(g, out), newTrace(g, out), newTcpdump(g, out), newGather(g, out),
		newDiagnose(g, out), newACLLog(g, out))
	return root
}

func (g *globalFlags) restConfig() (*rest.Config, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	if g.kubeconfig != "" {
		rules.ExplicitPath = g.kubeconfig
	}
	return clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: g.context}).ClientConfig()
}

func (g *globalFlags) client() (client.Client, error) {
	cfg, err := g.restConfig()
	if err != nil {
		return nil, err
	}
	cfg.Timeout = 10 * time.Second
	return kovnctl.NewClient(cfg)
}

// execer runs OVS and OVN tools in kovn's pods (kubectl exec).
func (g *globalFlags) execer() (*kovnctl.Execer, error) {
	cfg, err := g.restConfig()
	if err != nil {
		return nil, err
	}
	return kovnctl.NewExecer(cfg)
}

func newStatus(g *globalFlags, out io.Writer) *cobra.Command {
	var wait bool
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Components, nodes, subnets, interconnect, MCS and BGP: one screen that says what is wrong and why",
		Long: "status reads kovn's state from the cluster and prints each problem with its cause and a fix, then the " +
			"details. Exit status 1 when there is a problem. --wait polls until there is none (or --timeout).",
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			e, err := g.execer()
			if err != nil {
				return err
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
			defer cancel()
			var r kovnctl.Report
			for {
				in, err := kovnctl.Collect(ctx, c)
				if err == nil {
					in.Pingers, in.Central = scrapeMonitors(ctx, e)
					r = kovnctl.Build(in)
					if !wait || len(r.Problems) == 0 {
						break
					}
				} else if !wait {
					return err
				}
				select {
				case <-ctx.Done():
					if err != nil {
						return fmt.Errorf("%w (waited %s)", err, timeout)
					}
					fmt.Fprintf(os.Stderr, "still not healthy after %s\n", timeout)
					return printReport(out, g.output, r)
				case <-time.After(2 * time.Second):
				}
			}
			return printReport(out, g.output, r)
		},
	}
	cmd.Flags().BoolVar(&wait, "wait", false, "wait until kovn is healthy")
	cmd.Flags().DurationVar(&timeout, "timeout", 5*time.Minute, "how long status waits: for the API server's answers, and with --wait until kovn is healthy")
	return cmd
}

func printReport(out io.Writer, format string, r kovnctl.Report) error {
	switch format {
	case "json":
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		if err := enc.Encode(r); err != nil {
			return err
		}
	case "table", "":
		kovnctl.PrintStatus(out, r)
	default:
		return fmt.Errorf("unknown output %q: table or json", format)
	}
	if len(r.Problems) > 0 {
		return errProblems
	}
	return nil
}

// scrapeMonitors reads kovn-pinger's lossy paths and OVN central's raft and northd (as its
// monitors read them) at once: each waits up to kovnctl.ScrapeTimeout for a silent pod. Without
// pingers or central pods (or the right to exec in them) status goes on without them.
func scrapeMonitors(ctx context.Context, e *kovnctl.Execer) (kovnctl.PingerScrape, kovnctl.CentralScrape) {
	var pingers kovnctl.PingerScrape
	done := make(chan struct{})
	go func() {
		defer close(done)
		pingers, _ = kovnctl.ScrapePaths(ctx, e)
	}()
	central, _ := kovnctl.ScrapeCentral(ctx, e)
	<-done
	return pingers, central
}
