package rig

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

// FakeNodesSpec is what `kovn-rig fake-nodes SPEC` keeps alive: Count fake nodes of Cluster.
type FakeNodesSpec struct {
	Kubeconfig string `json:"kubeconfig"`
	Cluster    int    `json:"cluster"`
	Count      int    `json:"count"`
}

// fakeNodesStep runs the keeper beside the control plane; the supervisor restarts it if it
// exits, as it would a kubelet.
func (c Config) fakeNodesStep(cl int, kubeconfig, logs string) (Step, error) {
	spec := FakeNodesSpec{Kubeconfig: kubeconfig, Cluster: cl, Count: c.FakeNodes}
	file := filepath.Join(c.ClusterDir(cl), "fake-nodes.json")
	b, _ := json.MarshalIndent(spec, "", "  ")
	if err := os.WriteFile(file, b, 0o644); err != nil {
		return Step{}, err
	}
	return Step{Name: "fake-nodes", Daemon: true, Restart: true, Log: filepath.Join(logs, "fake-nodes.log"),
		Argv: []string{filepath.Join(c.KovnBinDir, "kovn-rig"), "fake-nodes", file}}, nil
}

// RunFakeNodes registers the fake nodes of a spec and renews their leases until SIGTERM.
func RunFakeNodes(specFile string) error {
	b, err := os.ReadFile(specFile)
	if err != nil {
		return err
	}
	var spec FakeNodesSpec
	if err := json.Unmarshal(b, &spec); err != nil {
		return fmt.Errorf("spec %s: %w", specFile, err)
	}
	rc, err := clientcmd.BuildConfigFromFlags("", spec.Kubeconfig)
	if err != nil {
		return err
	}
	rc.QPS, rc.Burst = 50, 100 // 200 nodes register in seconds without crowding out the rest
	kc, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	for {
		start := time.Now()
		// One List per round rather than a Get per node: the heartbeat should cost the
		// apiserver what 200 kubelets' lease renewals cost, not more.
		have := map[string]*corev1.Node{}
		list, err := kc.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: FakeNodeLabel + "=true"})
		if err != nil {
			log.Printf("list fake nodes: %v", err)
		} else {
			for i := range list.Items {
				have[list.Items[i].Name] = &list.Items[i]
			}
		}
		for i := 1; i <= spec.Count && err == nil && ctx.Err() == nil; i++ {
			if kerr := keepFakeNode(ctx, kc, spec.Cluster, i, have[FakeNodeName(spec.Cluster, i)]); kerr != nil {
				log.Printf("fake node %s: %v", FakeNodeName(spec.Cluster, i), kerr)
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(fakeRenewInterval - time.Since(start)):
		}
	}
}

// keepFakeNode registers node i if it is missing (cur nil) or was marked not Ready, and renews
// its lease.
func keepFakeNode(ctx context.Context, kc kubernetes.Interface, cl, i int, cur *corev1.Node) error {
	now := time.Now()
	want := FakeNode(cl, i, now)
	switch {
	case cur == nil:
		if _, err := kc.CoreV1().Nodes().Create(ctx, want, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
	case !nodeReady(cur):
		cur.Status.Conditions = want.Status.Conditions
		if _, err := kc.CoreV1().Nodes().UpdateStatus(ctx, cur, metav1.UpdateOptions{}); err != nil {
			return err
		}
	}
	lease := FakeLease(want.Name, now)
	leases := kc.CoordinationV1().Leases(corev1.NamespaceNodeLease)
	patch, _ := json.Marshal(map[string]any{"spec": lease.Spec})
	_, err := leases.Patch(ctx, lease.Name, types.MergePatchType, patch, metav1.PatchOptions{})
	if apierrors.IsNotFound(err) {
		_, err = leases.Create(ctx, lease, metav1.CreateOptions{})
	}
	return err
}
