package guard

import (
	"context"
	"testing"
	"time"

	libovsdb "github.com/ovn-org/libovsdb/client"
	"github.com/ovn-org/libovsdb/ovsdb"

	"github.com/kovn/kovn/pkg/ovn"
	"github.com/kovn/kovn/pkg/ovn/model/vswitch"
)

// TestZeroSNATGuard: on an affected OVS the guard turns ct_zero_snat off, again at once when
// ovs-vswitchd writes true on a restart, and leaves every other capability alone; on a fixed
// OVS it changes nothing.
func TestZeroSNATGuard(t *testing.T) {
	for _, tc := range []struct {
		version string
		want    string
	}{{"3.1.0", "false"}, {"3.3.0", "true"}} {
		t.Run(tc.version, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			ovs, dp := ovsWithDatapath(ctx, t, tc.version)
			gctx, stop := context.WithCancel(ctx)
			defer stop()
			// A long interval: the second change must be caught by the event, not the ticker.
			go func() { _ = (&ZeroSNATGuard{OVS: ovs, Interval: time.Hour}).Start(gctx) }()
			caps := func() map[string]string {
				var rows []vswitch.Datapath
				_ = ovs.List(ctx, &rows)
				if len(rows) != 1 {
					return nil
				}
				return rows[0].Capabilities
			}
			settle := func(what string) {
				t.Helper()
				deadline := time.Now().Add(2 * time.Second)
				for caps()["ct_zero_snat"] != tc.want && time.Now().Before(deadline) {
					time.Sleep(10 * time.Millisecond)
				}
				time.Sleep(100 * time.Millisecond) // a fixed OVS: give the guard time to do wrong
				if got := caps(); got["ct_zero_snat"] != tc.want || got["ct_state"] != "true" {
					t.Fatalf("%s: capabilities %v, want ct_zero_snat=%s and ct_state kept", what, got, tc.want)
				}
			}
			settle("guard started")
			// ovs-vswitchd restarts and writes its capabilities again.
			m := vswitch.Datapath{UUID: dp}
			if muts := ovn.MapMutations(&m.Capabilities, caps(), map[string]string{"ct_zero_snat": "true"}, nil); len(muts) > 0 {
				ops, err := ovs.Where(&m).Mutate(&m, muts...)
				if err != nil {
					t.Fatal(err)
				}
				if _, err := ovn.Transact(ctx, ovs, ops); err != nil {
					t.Fatal(err)
				}
			}
			settle("after ovs-vswitchd wrote ct_zero_snat=true again")
		})
	}
}

func TestZeroSNATCrashes(t *testing.T) {
	for v, want := range map[string]bool{"3.1.0": true, "3.1.2": true, "3.1.3": false, "3.0.4": true, "3.0.5": false,
		"2.17.7": true, "2.17.8": false, "3.2.2": true, "3.2.3": false, "3.3.0": false, "3.6.1": false, "4.0.0": false,
		"3.1.0-2+deb12u1": true, "2.16.9": true, "": true, "weird": true} {
		if got := zeroSNATCrashes(v); got != want {
			t.Errorf("%q: %v, want %v", v, got, want)
		}
	}
}

// TestOVSVersionChanged: the guard wakes for a new ovs_version, not for the statistics and
// next_cfg ovs-vswitchd keeps writing into the same row.
func TestOVSVersionChanged(t *testing.T) {
	v := func(s string) *string { return &s }
	cases := []struct {
		old, new *string
		want     bool
	}{{v("3.1.0"), v("3.1.0"), false}, {v("3.1.0"), v("3.3.0"), true}, {nil, v("3.1.0"), true}, {nil, nil, false}}
	for _, c := range cases {
		got := ovsVersionChanged(&vswitch.OpenvSwitch{OVSVersion: c.old, NextCfg: 1}, &vswitch.OpenvSwitch{OVSVersion: c.new, NextCfg: 2})
		if got != c.want {
			t.Errorf("%v -> %v: %v, want %v", c.old, c.new, got, c.want)
		}
	}
}

// ovsWithDatapath serves an Open_vSwitch DB with one netdev Datapath whose capabilities are
// what ovs-vswitchd writes, and returns the client and the Datapath's UUID.
func ovsWithDatapath(ctx context.Context, t *testing.T, version string) (libovsdb.Client, string) {
	t.Helper()
	ovs := serveOVS(ctx, t)
	dp := &vswitch.Datapath{UUID: ovn.NewNamedUUID(), Capabilities: map[string]string{"ct_zero_snat": "true", "ct_state": "true"}}
	root := &vswitch.OpenvSwitch{UUID: ovn.NewNamedUUID(), OVSVersion: &version, Datapaths: map[string]string{"netdev": dp.UUID}}
	var ops []ovsdb.Operation
	for _, m := range []any{dp, root} {
		o, err := ovs.Create(m)
		if err != nil {
			t.Fatal(err)
		}
		ops = append(ops, o...)
	}
	res, err := ovn.Transact(ctx, ovs, ops)
	if err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		var rows []vswitch.Datapath
		if err := ovs.List(ctx, &rows); err == nil && len(rows) == 1 {
			return ovs, rows[0].UUID
		}
		if time.Now().After(deadline) {
			t.Fatalf("the Datapath row never reached the cache (%v)", res)
		}
	}
}
