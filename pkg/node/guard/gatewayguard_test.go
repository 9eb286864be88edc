package guard

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kovnv1 "github.com/kovn/kovn/api/v1alpha1"
	"github.com/kovn/kovn/pkg/ovn"
	"github.com/kovn/kovn/pkg/ovn/model/vswitch"
)

// TestGatewayGuard: while ovn-controller runs nothing changes; once it is down on an
// interconnect gateway, BFD goes off on the tunnels that had it on (the Geneve ones, not a
// pod's port); on a node that is not a gateway, a dead ovn-controller changes nothing.
func TestGatewayGuard(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	tun := &vswitch.Interface{UUID: ovn.NewNamedUUID(), Name: "ovn-c1n2-0", Type: "geneve", BFD: map[string]string{"enable": "true", "min_rx": "100"}}
	pod := &vswitch.Interface{UUID: ovn.NewNamedUUID(), Name: "pod_h", BFD: map[string]string{"enable": "true"}}
	ovs := ovsWithInterfaces(ctx, t, map[string]string{}, tun, pod)
	bfd := func(name string) string {
		var rows []vswitch.Interface
		_ = ovs.WhereCache(func(i *vswitch.Interface) bool { return i.Name == name }).List(ctx, &rows)
		if len(rows) != 1 {
			return "missing"
		}
		return rows[0].BFD["enable"]
	}
	setGateway := func(on bool) {
		var rows []vswitch.OpenvSwitch
		if err := ovs.List(ctx, &rows); err != nil || len(rows) != 1 {
			t.Fatalf("Open_vSwitch: %v", err)
		}
		r := rows[0]
		r.ExternalIDs = map[string]string{}
		if on {
			r.ExternalIDs["ovn-is-interconn"] = "true"
		}
		o, _ := ovs.Where(&r).Update(&r, &r.ExternalIDs)
		if _, err := ovn.Transact(ctx, ovs, o); err != nil {
			t.Fatal(err)
		}
	}
	var alive atomic.Bool
	alive.Store(true)
	g := &GatewayGuard{OVS: ovs, Interval: 10 * time.Millisecond, alive: func(string) bool { return alive.Load() }}
	gctx, stop := context.WithCancel(ctx)
	defer stop()
	go func() { _ = g.Start(gctx) }()

	alive.Store(false) // not a gateway yet
	time.Sleep(200 * time.Millisecond)
	if got := bfd("ovn-c1n2-0"); got != "true" {
		t.Fatalf("non-gateway node: tunnel BFD %q, want untouched", got)
	}
	alive.Store(true)
	setGateway(true)
	time.Sleep(200 * time.Millisecond)
	if got := bfd("ovn-c1n2-0"); got != "true" {
		t.Fatalf("gateway with ovn-controller alive: tunnel BFD %q, want untouched", got)
	}
	alive.Store(false)
	deadline := time.Now().Add(5 * time.Second)
	for bfd("ovn-c1n2-0") != "false" && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if got, p := bfd("ovn-c1n2-0"), bfd("pod_h"); got != "false" || p != "true" {
		t.Fatalf("gateway with ovn-controller down: tunnel BFD %q (want false), pod port %q (want untouched)", got, p)
	}
}

// TestGatewayGuardCentralGateway: a node named in a centralized Subnet's gatewayNodes is a
// gateway to the guard; one named only by a distributed subnet, or not named, is not.
func TestGatewayGuardCentralGateway(t *testing.T) {
	central := &kovnv1.Subnet{ObjectMeta: metav1.ObjectMeta{Name: "central"}, Spec: kovnv1.SubnetSpec{CIDRBlock: "10.20.0.0/24",
		GatewayType: kovnv1.GatewayCentralized, GatewayNodes: []string{"n2", "n3"}}}
	distributed := &kovnv1.Subnet{ObjectMeta: metav1.ObjectMeta{Name: "dist"}, Spec: kovnv1.SubnetSpec{CIDRBlock: "10.21.0.0/24",
		GatewayNodes: []string{"n1"}}}
	c := networksClient(t, central, distributed)
	for node, want := range map[string]bool{"n1": false, "n2": true, "n3": true, "n4": false} {
		g := &GatewayGuard{Subnets: c, NodeName: node}
		if got := g.isCentralGateway(context.Background()); got != want {
			t.Errorf("%s: central gateway %v, want %v", node, got, want)
		}
	}
	if (&GatewayGuard{NodeName: "n2"}).isCentralGateway(context.Background()) {
		t.Error("no Subnets reader: no centralized gateway")
	}
}

// TestProcessAlive: this process is alive; a pidfile naming no process, or no pidfile, is not.
func TestProcessAlive(t *testing.T) {
	dir := t.TempDir()
	f := filepath.Join(dir, "self.pid")
	_ = os.WriteFile(f, []byte(strconv.Itoa(os.Getpid())+"\n"), 0o644)
	if !processAlive(f) {
		t.Error("own pid not alive")
	}
	_ = os.WriteFile(f, []byte("999999999\n"), 0o644)
	if processAlive(f) || processAlive(filepath.Join(dir, "none.pid")) {
		t.Error("dead pid or missing pidfile alive")
	}
}
