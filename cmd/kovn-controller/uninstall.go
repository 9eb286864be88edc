package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/yaml"

	"github.com/kovn/kovn/pkg/uninstall"
)

// uninstallMain is `kovn-controller uninstall`: the chart's pre-delete hook (see package
// uninstall). It returns the exit code.
func uninstallMain(args []string) int {
	fs := flag.NewFlagSet("kovn-controller uninstall", flag.ContinueOnError)
	namespace := fs.String("namespace", "kube-system", "namespace of kovn's workloads and of the cleanup pods")
	stopFirst := fs.String("stop-first", "", "like --stop, deleted (and waited for) before them: workloads on kovn's pod network")
	stop := fs.String("stop", "", "comma-separated deployment/NAME and daemonset/NAME to delete (and wait for) before the nodes are cleaned")
	podFile := fs.String("cleanup-pod", "", "YAML of the pod that cleans one node (its name and node are set per node)")
	timeout := fs.Duration("timeout", 3*time.Minute, "bound on each phase")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	o := uninstall.Options{Namespace: *namespace, Timeout: *timeout, Log: os.Stdout}
	for _, l := range []struct {
		flag string
		to   *[]uninstall.Workload
	}{{*stopFirst, &o.StopFirst}, {*stop, &o.Stop}} {
		for _, s := range strings.Split(l.flag, ",") {
			if s == "" {
				continue
			}
			w, err := uninstall.ParseWorkload(s)
			if err != nil {
				fmt.Fprintln(os.Stderr, "kovn-controller uninstall:", err)
				return 2
			}
			*l.to = append(*l.to, w)
		}
	}
	b, err := os.ReadFile(*podFile)
	if err != nil {
		fmt.Fprintln(os.Stderr, "kovn-controller uninstall: --cleanup-pod:", err)
		return 2
	}
	o.CleanupPod = &corev1.Pod{}
	if err := yaml.UnmarshalStrict(b, o.CleanupPod); err != nil {
		fmt.Fprintf(os.Stderr, "kovn-controller uninstall: %s: %v\n", *podFile, err)
		return 2
	}
	cfg, err := ctrl.GetConfig()
	if err != nil {
		fmt.Fprintln(os.Stderr, "kovn-controller uninstall:", err)
		return 1
	}
	kc, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, "kovn-controller uninstall:", err)
		return 1
	}
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	if err := uninstall.Run(ctx, kc, o); err != nil {
		fmt.Fprintln(os.Stderr, "kovn-controller uninstall:", err)
		return 1
	}
	fmt.Println("every node is clean")
	return 0
}
