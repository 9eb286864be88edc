package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kovn/kovn/pkg/kovnctl"
)

func newConnectivityTest(g *globalFlags, out io.Writer) *cobra.Command {
	var contexts, kubeconfigs []string
	opt := kovnctl.ConnTestOptions{Progress: os.Stderr}
	cmd := &cobra.Command{
		Use:   "connectivity-test",
		Short: "Pods in each cluster check pod<->pod, pod->Service, cross-cluster and DNS paths: a pass/fail table",
		Long: "connectivity-test runs an echo server and a client on the first --nodes Ready nodes of each cluster " +
			"(namespace " + kovnctl.TestNamespace + ", removed afterwards unless --keep). Each client reaches every " +
			"server in each family (same node, other node, other clusters), the Service by ClusterIP and by name, and " +
			"with several clusters the exported Service's ClusterSetIPs (a backend in every cluster must answer) and " +
			"its clusterset.local name. Clusters: --contexts of the kubeconfig, or --kubeconfigs (each file's current " +
			"context); default the current context. Exit status 1 when a check fails.",
		RunE: func(cmd *cobra.Command, _ []string) error {
			clusters, err := testClusters(g, contexts, kubeconfigs)
			if err != nil {
				return err
			}
			results, err := kovnctl.RunConnectivityTest(cmd.Context(), clusters, opt)
			if err != nil {
				return err
			}
			if g.output == "json" {
				enc := json.NewEncoder(out)
				enc.SetIndent("", "  ")
				if err := enc.Encode(results); err != nil {
					return err
				}
			} else {
				kovnctl.PrintResults(out, results)
			}
			for _, r := range results {
				if !r.OK {
					return errProblems
				}
			}
			return nil
		},
	}
	cmd.Flags().StringSliceVar(&contexts, "contexts", nil, "kubeconfig contexts, one per cluster")
	cmd.Flags().StringSliceVar(&kubeconfigs, "kubeconfigs", nil, "kubeconfig files, one per cluster (their current contexts)")
	cmd.Flags().StringVar(&opt.Image, "image", "kovn.io/kovn:dev", "image holding /kovn-probe (kovn's image does)")
	cmd.Flags().IntVar(&opt.Nodes, "nodes", 2, "nodes per cluster with a server and a client")
	cmd.Flags().DurationVar(&opt.Timeout, "timeout", 5*time.Minute, "for the whole test")
	cmd.Flags().BoolVar(&opt.Keep, "keep", false, "keep the test namespace and its pods")
	return cmd
}

func testClusters(g *globalFlags, contexts, kubeconfigs []string) ([]kovnctl.TestCluster, error) {
	type source struct{ file, context string }
	var srcs []source
	for _, c := range contexts {
		srcs = append(srcs, source{g.kubeconfig, c})
	}
	for _, f := range kubeconfigs {
		srcs = append(srcs, source{f, ""})
	}
	if len(srcs) == 0 {
		srcs = []source{{g.kubeconfig, g.context}}
	}
	var out []kovnctl.TestCluster
	for _, s := range srcs {
		rules := clientcmd.NewDefaultClientConfigLoadingRules()
		if s.file != "" {
			rules.ExplicitPath = s.file
		}
		cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: s.context})
		raw, err := cc.RawConfig()
		if err != nil {
			return nil, err
		}
		name := s.context
		if name == "" {
			name = raw.CurrentContext
		}
		cfg, err := cc.ClientConfig()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		cfg.Timeout = 15 * time.Second
		kube, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			return nil, err
		}
		c, err := kovnctl.NewClient(cfg)
		if err != nil {
			return nil, err
		}
		out = append(out, kovnctl.TestCluster{Name: name, Kube: kube, Client: c})
	}
	return out, nil
}
