// Package uninstall takes kovn off a cluster's nodes before `helm uninstall` deletes the
// release: it runs as the chart's pre-delete hook (a Job running `kovn-controller uninstall`).
//
// Order matters. kovn's agents go first, so nothing plumbs a node again while it is cleaned;
// OVS stays, so that deleting kovn's bridges also removes their kernel devices (and, where the
// node's own address sits on an OVS bridge, the node stays reachable while it is cleaned).
// Then one cleanup pod per node runs `kovn-daemon cleanup-node`, and the hook fails naming
// every node whose cleanup failed, with the cleanup's own words.
package uninstall

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// Workload is a Deployment or DaemonSet of kovn that goes before the nodes are cleaned; its
// pods carry the label app=Name.
type Workload struct {
	Kind string // "Deployment" or "DaemonSet"
	Name string
}

// ParseWorkload reads "deployment/NAME" or "daemonset/NAME".
func ParseWorkload(s string) (Workload, error) {
	kind, name, ok := strings.Cut(s, "/")
	switch {
	case !ok || name == "":
		return Workload{}, fmt.Errorf("workload %q: want deployment/NAME or daemonset/NAME", s)
	case strings.EqualFold(kind, "deployment"):
		return Workload{Kind: "Deployment", Name: name}, nil
	case strings.EqualFold(kind, "daemonset"):
		return Workload{Kind: "DaemonSet", Name: name}, nil
	}
	return Workload{}, fmt.Errorf("workload %q: kind %q is neither deployment nor daemonset", s, kind)
}

// Options are one uninstall.
type Options struct {
	Namespace string
	// StopFirst are deleted first and their pods waited for, while kovn still runs: kovn's
	// workloads on its own pod network (kovn-pinger), whose sandboxes need kovn-daemon to go.
	StopFirst []Workload
	// Stop are deleted next, and their pods waited for.
	Stop []Workload
	// CleanupPod is the pod run on every node (its NodeName and name are set per node); it
	// must exit 0 once the node is clean.
	CleanupPod *corev1.Pod
	// Timeout bounds each phase: the agents' pods gone, every node's cleanup finished.
	Timeout time.Duration
	// Poll is how often progress is looked at (default 1 s).
	Poll time.Duration
	Log  io.Writer
}

// Run stops kovn's agents, cleans every node and removes the cleanup pods; the error names
// each node whose cleanup failed or did not finish, and why.
func Run(ctx context.Context, kc kubernetes.Interface, o Options) error {
	if o.Poll == 0 {
		o.Poll = time.Second
	}
	if o.Log == nil {
		o.Log = io.Discard
	}
	for _, stop := range [][]Workload{o.StopFirst, o.Stop} {
		if err := stopAgents(ctx, kc, o, stop); err != nil {
			return err
		}
	}
	nodes, err := kc.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("listing nodes: %w", err)
	}
	var names []string
	for _, n := range nodes.Items {
		names = append(names, n.Name)
	}
	slices.Sort(names)
	return cleanNodes(ctx, kc, o, names)
}

// stopAgents deletes each workload and waits until none of its pods is left.
func stopAgents(ctx context.Context, kc kubernetes.Interface, o Options, stop []Workload) error {
	fg := metav1.DeletePropagationForeground
	del := metav1.DeleteOptions{PropagationPolicy: &fg}
	for _, w := range stop {
		var err error
		switch w.Kind {
		case "Deployment":
			err = kc.AppsV1().Deployments(o.Namespace).Delete(ctx, w.Name, del)
		case "DaemonSet":
			err = kc.AppsV1().DaemonSets(o.Namespace).Delete(ctx, w.Name, del)
		default:
			err = fmt.Errorf("unknown kind %q", w.Kind)
		}
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("deleting %s %s: %w", w.Kind, w.Name, err)
		}
		fmt.Fprintf(o.Log, "deleted %s %s\n", w.Kind, w.Name)
	}
	deadline := time.Now().Add(o.Timeout)
	for {
		var left []string
		for _, w := range stop {
			pods, err := kc.CoreV1().Pods(o.Namespace).List(ctx, metav1.ListOptions{LabelSelector: "app=" + w.Name})
			if err != nil {
				return fmt.Errorf("listing %s's pods: %w", w.Name, err)
			}
			for _, p := range pods.Items {
				left = append(left, p.Name)
			}
		}
		if len(left) == 0 {
			fmt.Fprintln(o.Log, "kovn's agents are gone")
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("kovn's agents still running after %s: %s", o.Timeout, strings.Join(left, ", "))
		}
		if err := sleep(ctx, o.Poll); err != nil {
			return err
		}
	}
}

// CleanupPodName is the cleanup pod of a node: "kovn-cleanup-" and the node's name, cut to the
// 63 characters a pod name may have in a label-safe form.
func CleanupPodName(node string) string {
	name := "kovn-cleanup-" + node
	if len(name) > 63 {
		name = strings.TrimRight(name[:63], "-.")
	}
	return name
}

// cleanNodes runs the cleanup pod on every node, waits for each to finish and deletes them.
func cleanNodes(ctx context.Context, kc kubernetes.Interface, o Options, nodes []string) error {
	pods := kc.CoreV1().Pods(o.Namespace)
	for _, n := range nodes {
		p := o.CleanupPod.DeepCopy()
		p.Name, p.Namespace, p.Spec.NodeName = CleanupPodName(n), o.Namespace, n
		p.Spec.RestartPolicy = corev1.RestartPolicyNever
		// A pod left by an earlier, interrupted uninstall is replaced.
		if err := pods.Delete(ctx, p.Name, metav1.DeleteOptions{}); err == nil {
			if err := waitGone(ctx, kc, o, p.Name); err != nil {
				return err
			}
		}
		if _, err := pods.Create(ctx, p, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("node %s: creating its cleanup pod: %w", n, err)
		}
	}
	outcome := waitCleanups(ctx, kc, o, nodes)
	var errs []error
	for _, n := range nodes {
		if msg, failed := outcome[n]; failed {
			errs = append(errs, fmt.Errorf("node %s: %s", n, msg))
		} else {
			fmt.Fprintf(o.Log, "node %s is clean\n", n)
		}
		if err := pods.Delete(ctx, CleanupPodName(n), metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("node %s: deleting its cleanup pod: %w", n, err))
		}
	}
	return errors.Join(errs...)
}

// waitCleanups waits until every cleanup pod has finished, or the timeout; it returns the
// nodes whose cleanup failed or did not finish, with the reason.
func waitCleanups(ctx context.Context, kc kubernetes.Interface, o Options, nodes []string) map[string]string {
	failed := map[string]string{}
	pending := slices.Clone(nodes)
	deadline := time.Now().Add(o.Timeout)
	for len(pending) > 0 {
		var still []string
		for _, n := range pending {
			p, err := kc.CoreV1().Pods(o.Namespace).Get(ctx, CleanupPodName(n), metav1.GetOptions{})
			switch {
			case err != nil:
				still = append(still, n)
			case p.Status.Phase == corev1.PodSucceeded:
			case p.Status.Phase == corev1.PodFailed:
				failed[n] = "cleanup failed: " + terminationMessage(p)
			default:
				still = append(still, n)
			}
		}
		pending = still
		if len(pending) == 0 || time.Now().After(deadline) || sleep(ctx, o.Poll) != nil {
			break
		}
	}
	for _, n := range pending {
		failed[n] = fmt.Sprintf("its cleanup pod did not finish within %s (is the node down?)", o.Timeout)
	}
	return failed
}

// terminationMessage is what the cleanup container said when it failed (its log tail, with
// terminationMessagePolicy FallbackToLogsOnError).
func terminationMessage(p *corev1.Pod) string {
	for _, cs := range p.Status.ContainerStatuses {
		if t := cs.State.Terminated; t != nil {
			return fmt.Sprintf("exit code %d: %s", t.ExitCode, strings.TrimSpace(t.Message))
		}
	}
	return p.Status.Message
}

func waitGone(ctx context.Context, kc kubernetes.Interface, o Options, name string) error {
	deadline := time.Now().Add(o.Timeout)
	for {
		if _, err := kc.CoreV1().Pods(o.Namespace).Get(ctx, name, metav1.GetOptions{}); apierrors.IsNotFound(err) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("old cleanup pod %s still there after %s", name, o.Timeout)
		}
		if err := sleep(ctx, o.Poll); err != nil {
			return err
		}
	}
}

func sleep(ctx context.Context, d time.Duration) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}
