package guard

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/ovn-org/libovsdb/cache"
	libovsdb "github.com/ovn-org/libovsdb/client"
	"github.com/ovn-org/libovsdb/model"
	"github.com/ovn-org/libovsdb/ovsdb"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/kovn/kovn/pkg/ovn"
	"github.com/kovn/kovn/pkg/ovn/model/vswitch"
)

// ZeroSNATGuard keeps ovn-controller from committing connections with an empty SNAT
// (ct(commit,nat(src)): "zero SNAT", which lets conntrack pick a new source port only on a
// tuple collision) on a userspace datapath whose conntrack crashes on them. Until the fix in
// OVS 2.17.8, 3.0.5, 3.1.3 and 3.2.3 ("conntrack: Remove nat_conn introducing key
// directionality"), such a connection and its reverse-NAT entry share a hash bucket; once the
// connection expires, the next packet of the same 5-tuple finds the reverse-NAT entry and
// ovs-vswitchd aborts in conn_update_state(). On the rig (Debian's 3.1.0) a UDP flow paused
// for 31 s, just past its timeout, took ovs-vswitchd down on both nodes.
//
// ovn-controller adds nat(src) to every ct_commit when the datapath's capabilities column
// says ct_zero_snat=true, which ovs-vswitchd writes whenever it starts. The guard sets it to
// false on every change of the Datapath table; ovn-controller then recomputes its flows
// without it. What this gives up: on a tuple collision (a hairpinned Service connection
// reusing a client port) the newer connection is not re-ported, as on an older kernel.
type ZeroSNATGuard struct {
	OVS      libovsdb.Client
	Interval time.Duration // how often to look even without a change event (default 5 s)
}

// NeedLeaderElection: every node guards its own datapath.
func (g *ZeroSNATGuard) NeedLeaderElection() bool { return false }

// Start implements manager.Runnable.
func (g *ZeroSNATGuard) Start(ctx context.Context) error {
	if g.Interval == 0 {
		g.Interval = 5 * time.Second
	}
	log := ctrl.Log.WithName("zero-snat-guard")
	changed := make(chan struct{}, 1)
	kick := func() {
		select {
		case changed <- struct{}{}:
		default:
		}
	}
	// Datapath rows are what the guard rewrites; of the Open_vSwitch row only ovs_version
	// matters (ovs-vswitchd rewrites the row's other columns, statistics and next_cfg, all the time).
	g.OVS.Cache().AddEventHandler(&cache.EventHandlerFuncs{
		AddFunc: func(table string, _ model.Model) {
			if table == "Datapath" || table == "Open_vSwitch" {
				kick()
			}
		},
		UpdateFunc: func(table string, old, new model.Model) {
			if table == "Datapath" || table == "Open_vSwitch" && ovsVersionChanged(old, new) {
				kick()
			}
		},
	})
	t := time.NewTicker(g.Interval)
	defer t.Stop()
	for {
		if n, version, err := g.turnOff(ctx); err != nil {
			log.Error(err, "setting ct_zero_snat=false in the Datapath capabilities")
		} else if n > 0 {
			log.Info("ct_zero_snat turned off: this OVS's userspace conntrack aborts on zero-SNAT connections", "ovsVersion", version, "datapaths", n)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		case <-changed:
		}
	}
}

// turnOff sets ct_zero_snat=false on every Datapath row that says true, when the OVS version
// is one whose userspace conntrack has the bug; it returns how many rows it changed.
func (g *ZeroSNATGuard) turnOff(ctx context.Context) (int, string, error) {
	var roots []vswitch.OpenvSwitch
	if err := g.OVS.List(ctx, &roots); err != nil || len(roots) != 1 {
		return 0, "", err
	}
	version := ""
	if roots[0].OVSVersion != nil {
		version = *roots[0].OVSVersion
	}
	if !zeroSNATCrashes(version) {
		return 0, version, nil
	}
	var dps []*vswitch.Datapath
	if err := g.OVS.WhereCache(func(d *vswitch.Datapath) bool { return d.Capabilities["ct_zero_snat"] == "true" }).List(ctx, &dps); err != nil || len(dps) == 0 {
		return 0, version, err
	}
	var ops []ovsdb.Operation
	for _, d := range dps {
		m := vswitch.Datapath{UUID: d.UUID}
		o, err := g.OVS.Where(&m).Mutate(&m, ovn.MapMutations(&m.Capabilities, d.Capabilities, map[string]string{"ct_zero_snat": "false"}, nil)...)
		if err != nil {
			return 0, version, err
		}
		ops = append(ops, o...)
	}
	if _, err := ovn.Transact(ctx, g.OVS, ops); err != nil {
		return 0, version, fmt.Errorf("ovs %s: %w", version, err)
	}
	return len(dps), version, nil
}

// zeroSNATCrashes reports whether an OVS version's userspace conntrack aborts on zero-SNAT
// connections: before 2.17.8, 3.0.5, 3.1.3 and 3.2.3 (3.3.0 and later are fixed). A version
// it cannot read counts as affected: turning zero SNAT off costs little.
func zeroSNATCrashes(version string) bool {
	parts := strings.SplitN(strings.SplitN(version, "-", 2)[0], ".", 3)
	if len(parts) != 3 {
		return true
	}
	var n [3]int
	for i, p := range parts {
		v, err := strconv.Atoi(p)
		if err != nil {
			return true
		}
		n[i] = v
	}
	major, minor, patch := n[0], n[1], n[2]
	if major > 3 || major == 3 && minor >= 3 {
		return false
	}
	// The first fixed patch release of each maintained branch; older branches never got the fix.
	fixed := map[[2]int]int{{3, 2}: 3, {3, 1}: 3, {3, 0}: 5, {2, 17}: 8}
	first, maintained := fixed[[2]int{major, minor}]
	return !maintained || patch < first
}

func ovsVersionChanged(old, new model.Model) bool {
	o, ok1 := old.(*vswitch.OpenvSwitch)
	n, ok2 := new.(*vswitch.OpenvSwitch)
	if !ok1 || !ok2 {
		return true
	}
	return (o.OVSVersion == nil) != (n.OVSVersion == nil) || o.OVSVersion != nil && *o.OVSVersion != *n.OVSVersion
}
