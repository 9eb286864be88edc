package ovnmonitor

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/ovn-org/libovsdb/client"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/kovn/kovn/pkg/ovn"
	"github.com/kovn/kovn/pkg/ovn/model/nb"
	"github.com/kovn/kovn/pkg/ovn/model/sb"
)

// NbCfg exports how many NB configurations each chassis's ovn-controller is behind: NB_Global's
// nb_cfg minus the chassis's Chassis_Private nb_cfg (which ovn-controller raises once it has
// installed the flows of that configuration). nb_cfg only moves when someone bumps it, so
// NbCfg bumps it every probe interval: a chassis that stops keeping up then falls one behind per
// interval. Only the central node whose ovn-northd is active exports and bumps, so the
// clusterset has one source of these series however many central nodes there are.
type NbCfg struct {
	NB, SB    client.Client // this node's members (any raft role: followers forward writes)
	NorthdCtl string        // this node's ovn-northd control socket
}

var (
	nbCfg = prometheus.NewDesc("kovn_ovn_nb_cfg",
		"NB_Global.nb_cfg: the NB configuration generation (exported by the central node whose ovn-northd is active).", nil, nil)
	chassisLag = prometheus.NewDesc("kovn_ovn_chassis_nb_cfg_lag",
		"NB configurations a chassis's ovn-controller has not installed yet: NB_Global.nb_cfg minus its Chassis_Private.nb_cfg "+
			"(exported by the central node whose ovn-northd is active, which bumps nb_cfg every probe interval).",
		[]string{"chassis"}, nil)
)

// active says whether this node's ovn-northd holds the southbound lock.
func (n *NbCfg) active(ctx context.Context) bool {
	s, err := ovn.DaemonStatus(ctx, n.NorthdCtl)
	return err == nil && s == "active"
}

// collect exports nb_cfg and each chassis's lag from the clients' caches. The Collector calls
// it in the scrape that read this node's ovn-northd active, so the status is asked once.
func (n *NbCfg) collect(ctx context.Context, ch chan<- prometheus.Metric) {
	var globals []nb.NBGlobal
	var chassis []sb.ChassisPrivate
	if err := n.NB.List(ctx, &globals); err != nil || len(globals) != 1 {
		return
	}
	if err := n.SB.List(ctx, &chassis); err != nil {
		return
	}
	cfg := globals[0].NbCfg
	gauge(ch, nbCfg, float64(cfg))
	for _, c := range chassis {
		gauge(ch, chassisLag, float64(max(cfg-c.NbCfg, 0)), c.Name)
	}
}

// Probe bumps nb_cfg every interval while this node's ovn-northd is active, until ctx ends.
func (n *NbCfg) Probe(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		bctx, cancel := context.WithTimeout(ctx, interval)
		if n.active(bctx) {
			if _, err := ovn.BumpNbCfg(bctx, n.NB); err != nil {
				fmt.Fprintln(os.Stderr, "kovn-ovn-monitor: bumping nb_cfg:", err)
			}
		}
		cancel()
	}
}
