package ovnmonitor

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ovn-org/libovsdb/client"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/kovn/kovn/pkg/ovn"
	"github.com/kovn/kovn/pkg/ovn/model/nb"
	"github.com/kovn/kovn/pkg/ovn/model/sb"
	"github.com/kovn/kovn/pkg/ovn/ovntest"
)

// fakeNorthd answers `status` as ovn-northd would, with status's current value.
func fakeNorthd(t *testing.T, status *atomic.Value) string {
	return ovntest.ServeUnixctl(t, func(string) any { return "Status: " + status.Load().(string) + "\n" })
}

// TestNbCfg: the active northd's monitor exports nb_cfg and each chassis's lag behind it, a
// standby's exports nothing, and a probe bumps nb_cfg only while active.
func TestNbCfg(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	sbModel, err := sb.DatabaseModel()
	if err != nil {
		t.Fatal(err)
	}
	nbEP := ovntest.ServeNB(t)
	sbEP := ovntest.Serve(t, ovntest.SocketPath(t), sbModel)
	nbc, err := ovn.ConnectNB(ctx, ovn.Config{Endpoints: []string{nbEP}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nbc.Close)
	sbc, err := ovn.Connect(ctx, sbModel.Client(), ovn.Config{Endpoints: []string{sbEP}}, &sb.ChassisPrivate{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sbc.Close)
	ovntest.CreateNBGlobal(t, nbc)
	for range 3 {
		if _, err := ovn.BumpNbCfg(ctx, nbc); err != nil {
			t.Fatal(err)
		}
	}
	insert(ctx, t, sbc, &sb.ChassisPrivate{Name: "n1", NbCfg: 3}, &sb.ChassisPrivate{Name: "n2", NbCfg: 1})
	var status atomic.Value
	status.Store("active")
	n := &NbCfg{NB: nbc, SB: sbc, NorthdCtl: fakeNorthd(t, &status)}
	c := &Collector{Daemons: []Daemon{{Label: "northd", Ctl: n.NorthdCtl}}}
	c.NbCfg.Store(n)
	want := func(text string) {
		t.Helper()
		if err := testutil.CollectAndCompare(c, strings.NewReader(text), "kovn_ovn_nb_cfg", "kovn_ovn_chassis_nb_cfg_lag"); err != nil {
			t.Fatal(err)
		}
	}
	waitCache(t, func() bool { var g []nb.NBGlobal; return nbc.List(ctx, &g) == nil && len(g) == 1 && g[0].NbCfg == 3 })
	want(`# HELP kovn_ovn_chassis_nb_cfg_lag NB configurations a chassis's ovn-controller has not installed yet: NB_Global.nb_cfg minus its Chassis_Private.nb_cfg (exported by the central node whose ovn-northd is active, which bumps nb_cfg every probe interval).
# TYPE kovn_ovn_chassis_nb_cfg_lag gauge
kovn_ovn_chassis_nb_cfg_lag{chassis="n1"} 0
kovn_ovn_chassis_nb_cfg_lag{chassis="n2"} 2
# HELP kovn_ovn_nb_cfg NB_Global.nb_cfg: the NB configuration generation (exported by the central node whose ovn-northd is active).
# TYPE kovn_ovn_nb_cfg gauge
kovn_ovn_nb_cfg 3
`)
	probeCtx, stopProbe := context.WithCancel(ctx)
	go n.Probe(probeCtx, 50*time.Millisecond)
	waitCache(t, func() bool { var g []nb.NBGlobal; return nbc.List(ctx, &g) == nil && g[0].NbCfg >= 5 })
	status.Store("standby")
	time.Sleep(200 * time.Millisecond) // a bump begun while active may land
	var g []nb.NBGlobal
	_ = nbc.List(ctx, &g)
	time.Sleep(300 * time.Millisecond)
	var g2 []nb.NBGlobal
	_ = nbc.List(ctx, &g2)
	stopProbe()
	if g2[0].NbCfg != g[0].NbCfg {
		t.Fatalf("a standby's probe bumped nb_cfg %d -> %d", g[0].NbCfg, g2[0].NbCfg)
	}
	if got := testutil.CollectAndCount(c, "kovn_ovn_nb_cfg", "kovn_ovn_chassis_nb_cfg_lag"); got != 0 {
		t.Fatalf("a standby exports %d nb_cfg series", got)
	}
}

func insert(ctx context.Context, t *testing.T, c client.Client, rows ...*sb.ChassisPrivate) {
	t.Helper()
	for _, r := range rows {
		ops, err := c.Create(r)
		if err == nil {
			_, err = ovn.Transact(ctx, c, ops)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	waitCache(t, func() bool { var cp []sb.ChassisPrivate; return c.List(ctx, &cp) == nil && len(cp) == len(rows) })
}

func waitCache(t *testing.T, ok func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !ok(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the cache never got there")
		}
	}
}
