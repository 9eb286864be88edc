package cluster

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kovn/kovn/pkg/cluster/nbsync"
	"github.com/kovn/kovn/pkg/cluster/topology"
	"github.com/kovn/kovn/pkg/ovn/model/nb"
)

// Rows of objects deleted while the controller was down are collected at start-up; rows of
// objects that exist are not.
func TestOrphanCollector(t *testing.T) {
	alive := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns1", Name: "alive"}, Spec: corev1.PodSpec{NodeName: "n1"}}
	e := defaultEnv(t, alive)
	ctx := context.Background()
	for _, sh := range []topology.Shard{
		topology.ForPod(topology.PodIn{Namespace: "ns1", Name: "alive", Node: "n1", Switch: "ovn-default", IPs: testAddrs("10.16.0.5"), MAC: "0a:58:0a:10:00:05"}),
		topology.ForPod(topology.PodIn{Namespace: "ns1", Name: "gone", Node: "n1", Switch: "ovn-default", IPs: testAddrs("10.16.0.6"), MAC: "0a:58:0a:10:00:06"}),
		topology.ForNode(topology.NodeIn{Name: "n-gone", NodeIPs: testAddrs("172.30.1.99"), JoinIPs: testAddrs("100.64.0.99"), JoinMAC: "0a:58:64:40:00:63"}, e.st.Join()),
	} {
		if _, err := nbsync.Apply(ctx, e.nb, sh); err != nil {
			t.Fatal(err)
		}
	}
	g := &OrphanCollector{Cache: e.c, Live: e.c, State: e.st, NB: e.nb}
	n, err := g.Collect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if n != 2 {
		t.Errorf("collected %d owners, want 2 (pod ns1/gone, node n-gone)", n)
	}
	if e.lsp("gone.ns1") != nil || e.lsp("node-n-gone") != nil {
		t.Error("rows of deleted objects survived")
	}
	if e.lsp("alive.ns1") == nil || e.lsp("node-n1") == nil {
		t.Error("rows of existing objects were collected")
	}
	var pgs []nb.PortGroup
	_ = e.nb.List(ctx, &pgs)
	for _, pg := range pgs {
		if pg.Name == topology.NodePortGroup("n-gone") {
			t.Error("port group of the deleted node survived")
		}
	}
	if n, _ := g.Collect(ctx); n != 0 {
		t.Errorf("second pass collected %d owners, want 0", n)
	}
}
