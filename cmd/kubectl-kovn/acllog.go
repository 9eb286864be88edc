package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sort"
	"time"

	"github.com/spf13/cobra"

	"github.com/kovn/kovn/pkg/kovnctl"
)

func newACLLog(g *globalFlags, out io.Writer) *cobra.Command {
	var opts kovnctl.ACLLogOptions
	cmd := &cobra.Command{
		Use:   "acl-log",
		Short: "Show the ACL log lines of every node (NetworkPolicy and Subnet rules with logging on): verdict, rule, pods, protocol, ports",
		Long: `Show the lines ovn-controller logs for ACLs with logging on: a namespace's NetworkPolicies
(annotation ovn.kovn.io/acl-logging: {"deny": "alert", "allow": "notice"}) and Subnet ACLs with
log: true. Each line names the policy or Subnet rule, its verdict, the pods at both ends, the
protocol and ports. Lines are rate-limited per node (kovn-controller --acl-log-rate).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			e, err := g.execer()
			if err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt)
			defer stop()
			if !opts.Follow {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, 2*time.Minute)
				defer cancel()
			}
			enc := json.NewEncoder(out)
			if g.output != "json" {
				fmt.Fprintf(out, kovnctl.ACLLogFormat+" %s\n", "TIME", "NODE", "VERDICT", "ACL", "PROTOCOL", "SOURCE -> DESTINATION")
			}
			show := func(le kovnctl.ACLLogEntry) {
				if g.output == "json" {
					_ = enc.Encode(le) // one object per line, also while following
					return
				}
				fmt.Fprint(out, kovnctl.FormatACLLogEntry(le))
			}
			warn := func(err error) { fmt.Fprintln(os.Stderr, "warning:", err) }
			if opts.Follow {
				return e.ReadACLLog(ctx, opts, show, warn)
			}
			// Every node's lines, merged in time order (a node's own order kept within a second).
			var all []kovnctl.ACLLogEntry
			if err := e.ReadACLLog(ctx, opts, func(le kovnctl.ACLLogEntry) { all = append(all, le) }, warn); err != nil {
				return err
			}
			sort.SliceStable(all, func(i, j int) bool { return all[i].Time < all[j].Time })
			for _, le := range all {
				show(le)
			}
			return nil
		},
	}
	cmd.Flags().StringVarP(&opts.Namespace, "namespace", "n", "", "only lines of this namespace's policies or its pods (default: all)")
	cmd.Flags().BoolVarP(&opts.Follow, "follow", "f", false, "keep printing new lines until interrupted")
	cmd.Flags().StringToStringVar(&opts.Files, "log-file", nil,
		"NODE=PATH: read ovn-controller's log file PATH as NODE's instead of the chart's containers (OVN as a host service; repeatable)")
	cmd.Flags().DurationVar(&opts.Since, "since", 0, "only lines written this long ago or later, e.g. 5m (default: all kept)")
	return cmd
}
