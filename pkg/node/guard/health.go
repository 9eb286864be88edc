package guard

import (
	"cmp"
	"errors"
	"net"
	"time"

	libovsdb "github.com/ovn-org/libovsdb/client"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/kovn/kovn/pkg/cni"
	"github.com/kovn/kovn/pkg/ovn"
)

// NodeHealth exports whether this node's OVS and ovn-controller are up, and OVS's flow counts
// and tunnels (ovsHealth), read at each scrape.
type NodeHealth struct {
	OVS                  *ovn.Liveness // the node's Open_vSwitch database
	VswitchdCtl          string        // ovs-vswitchd's control socket; empty: the database connection alone
	OVNControllerPidfile string

	OVSClient         libovsdb.Client // the node's Open_vSwitch database, for the tunnel series; nil: none
	OVSRunDir         string          // where ovs-vswitchd's pidfile names its socket when VswitchdCtl is empty
	IntegrationBridge string          // whose OpenFlow flows are counted; empty: br-int
}

// Register adds the gauges to reg.
func (h *NodeHealth) Register(reg prometheus.Registerer) error {
	return errors.Join(
		reg.Register(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "kovn_node_ovs_up",
			Help: "1 while this node's OVS database is connected and ovs-vswitchd answers on its control socket."}, h.ovsUp)),
		reg.Register(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "kovn_node_ovn_controller_up",
			Help: "1 while the ovn-controller named by its pidfile runs on this node."}, h.ovnControllerUp)),
		reg.Register(h.ovsHealth()))
}

// ovsHealth is the flow and tunnel collector for this node's OVS.
func (h *NodeHealth) ovsHealth() *ovsHealth {
	o := &ovsHealth{db: h.OVSClient, ctl: VswitchdSocket{Ctl: h.VswitchdCtl, RunDir: h.OVSRunDir},
		bridge: cmp.Or(h.IntegrationBridge, cni.DefaultBridge), timeout: ovsHealthTimeout}
	if h.OVS != nil {
		o.dbLive = h.OVS.Answers
	}
	return o
}

func (h *NodeHealth) ovsUp() float64 {
	if !h.OVS.Answers() {
		return 0
	}
	if h.VswitchdCtl != "" {
		c, err := net.DialTimeout("unix", h.VswitchdCtl, 500*time.Millisecond)
		if err != nil {
			return 0
		}
		c.Close()
	}
	return 1
}

func (h *NodeHealth) ovnControllerUp() float64 {
	if processAlive(h.OVNControllerPidfile) {
		return 1
	}
	return 0
}
