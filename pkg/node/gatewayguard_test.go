package node

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

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
