package guard

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	libovsdb "github.com/ovn-org/libovsdb/client"
	"github.com/prometheus/client_golang/prometheus"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/kovn/kovn/pkg/node/peerprobe"
	"github.com/kovn/kovn/pkg/ovn"
	"github.com/kovn/kovn/pkg/ovn/model/vswitch"
)

// ovsHealthTimeout bounds each read of a scrape: a busy or hung ovs-vswitchd costs one scrape
// at most this long per read (the reads run in parallel), never a stuck /metrics.
const ovsHealthTimeout = 2 * time.Second

var (
	openflowFlowsDesc = prometheus.NewDesc("kovn_node_openflow_flows",
		"OpenFlow flows in this node's integration bridge: the flows ovs-vswitchd's bridge/dump-flows lists, less the ones "+
			"OVS hides from controllers (its internal table 254, priorities above 65535), i.e. what ovs-ofctl dump-flows "+
			"counts. Absent when ovs-vswitchd gives no usable answer within 2 s.", []string{"bridge"}, nil)
	datapathFlowsDesc = prometheus.NewDesc("kovn_node_datapath_flows",
		"Flows cached in this node's OVS datapaths (megaflows), summed over its datapaths, as ovs-vswitchd's upcall/show "+
			"reports them (current). Absent when ovs-vswitchd gives no usable answer within 2 s.", nil, nil)
	tunnelsDesc = prometheus.NewDesc("kovn_node_tunnels",
		"Tunnel interfaces (type geneve, vxlan or stt) in this node's Open_vSwitch database, on any bridge. Absent while "+
			"the database does not answer.", nil, nil)
	tunnelBFDUpDesc = prometheus.NewDesc("kovn_node_tunnel_bfd_up",
		"Per tunnel interface of this node that has a BFD session (a state in its bfd_status): 1 when the state is up "+
			"and, if reported, forwarding is true; else 0. Tunnels without BFD are not listed.",
		[]string{"interface", "remote_ip"}, nil)
	tunnelsBFDDesc = prometheus.NewDesc("kovn_node_tunnels_bfd",
		"Tunnel interfaces of this node by BFD session state (bfd_status:state: up, down, init, admin_down); tunnels "+
			"without BFD are not counted.", []string{"state"}, nil)
)

// tunnelTypes are the Interface types of OVN's tunnels between chassis.
var tunnelTypes = map[string]bool{"geneve": true, "vxlan": true, "stt": true}

// findTunnels are the node's tunnel interfaces, from the OVS client's cache.
func findTunnels(ctx context.Context, db libovsdb.Client) ([]*vswitch.Interface, error) {
	return ovn.Find(ctx, db, ovnTunnel)
}

// ovnTunnel says whether i is one of OVN's tunnels between chassis: a tunnel interface that is
// not one of kovn's interconnect probes (peerprobe: another cluster's reachability, not this
// node's).
func ovnTunnel(i *vswitch.Interface) bool {
	return tunnelTypes[i.Type] && i.ExternalIDs[ovn.OwnerTypeKey] != peerprobe.OwnerType
}

// bfdStates are the session states OVS writes to bfd_status:state. Each is exported, 0
// included, so a dashboard's "down" panel shows 0 rather than no data on a healthy node.
var bfdStates = []string{"up", "down", "init", "admin_down"}

// hiddenFlowTable is ofproto-dpif's internal table (TBL_INTERNAL): OVS's own flows, hidden from
// controllers; bridge/dump-flows lists them, ovs-ofctl dump-flows does not.
const hiddenFlowTable = 254

// ovsHealth exports the node's OpenFlow and datapath flow counts and its tunnels' BFD
// sessions, read at each scrape. A read that fails exports nothing for its series: a gap says
// "unknown", a 0 would say "no flows" or "no tunnels".
type ovsHealth struct {
	db      libovsdb.Client // the node's Open_vSwitch database; nil: no tunnel series
	dbLive  func() bool     // whether db answers; nil: trust its cache
	ctl     VswitchdSocket  // ovs-vswitchd's control socket; zero: no flow series
	bridge  string          // the integration bridge
	timeout time.Duration
}

// Describe implements prometheus.Collector.
func (o *ovsHealth) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{openflowFlowsDesc, datapathFlowsDesc, tunnelsDesc, tunnelBFDUpDesc, tunnelsBFDDesc} {
		ch <- d
	}
}

// Collect implements prometheus.Collector. ovs-vswitchd's two reads run in parallel so a hung
// daemon costs the scrape one timeout, not two.
func (o *ovsHealth) Collect(ch chan<- prometheus.Metric) {
	var wg sync.WaitGroup
	if o.ctl != (VswitchdSocket{}) {
		wg.Add(2)
		go func() { defer wg.Done(); o.collectOpenFlow(ch) }()
		go func() { defer wg.Done(); o.collectDatapath(ch) }()
	}
	o.collectTunnels(ch)
	wg.Wait()
}

// unreadable notes a read that failed. Only at debug level: a node whose OVS is down would
// otherwise log at every scrape, and kovn_node_ovs_up already says so.
func unreadable(read string, err error) {
	ctrl.Log.WithName("ovs-health").V(1).Info("OVS metric not exported", "read", read, "error", err.Error())
}

// unixctl calls command on ovs-vswitchd, bounded by the collector's timeout.
func (o *ovsHealth) unixctl(command string, args ...string) (string, error) {
	socket, err := o.ctl.Path()
	if err != nil {
		return "", err
	}
	ctx, cancel := context.WithTimeout(context.Background(), o.timeout)
	defer cancel()
	return ovn.Unixctl(ctx, socket, command, args...)
}

// collectOpenFlow counts the integration bridge's flows. OpenFlow has no cheaper count over a
// control socket than the dump itself: with OVN's 100k+ flows on a big cluster the reply is
// tens of MB, built in ovs-vswitchd's main loop, at each scrape. That is accepted (it is what
// kube-ovn-monitor does too); a reply slower than the timeout leaves the series absent.
func (o *ovsHealth) collectOpenFlow(ch chan<- prometheus.Metric) {
	out, err := o.unixctl("bridge/dump-flows", o.bridge)
	if err == nil {
		var n int
		if n, err = countOpenFlowFlows(out); err == nil {
			ch <- prometheus.MustNewConstMetric(openflowFlowsDesc, prometheus.GaugeValue, float64(n), o.bridge)
			return
		}
	}
	unreadable("bridge/dump-flows", err)
}

// collectDatapath reads the datapath flow count. upcall/show, not dpif/show: since OVS 2.x
// dpif/show prints only "hit:N missed:N" per datapath, no flow count (seen on OVS 3.1), and
// dpctl/show lists every datapath port besides. upcall/show's count is at most 100 ms old.
func (o *ovsHealth) collectDatapath(ch chan<- prometheus.Metric) {
	out, err := o.unixctl("upcall/show")
	if err == nil {
		var n int
		if n, err = parseUpcallShowFlows(out); err == nil {
			ch <- prometheus.MustNewConstMetric(datapathFlowsDesc, prometheus.GaugeValue, float64(n))
			return
		}
	}
	unreadable("upcall/show", err)
}

// collectTunnels reads the tunnels from the database client's cache. While the database does
// not answer that cache may be stale, so nothing is exported rather than an old picture.
func (o *ovsHealth) collectTunnels(ch chan<- prometheus.Metric) {
	if o.db == nil || (o.dbLive != nil && !o.dbLive()) {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), o.timeout)
	defer cancel()
	tunnels, err := findTunnels(ctx, o.db)
	if err != nil {
		unreadable("Interface table", err)
		return
	}
	byState := map[string]int{}
	for _, s := range bfdStates {
		byState[s] = 0
	}
	for _, t := range tunnels {
		// ovn-controller enables BFD only on the tunnels toward the chassis of an HA gateway
		// (or of an HA chassis group), so most tunnels have no session and no state.
		state, ok := t.BFDStatus["state"]
		if !ok {
			continue
		}
		byState[state]++
		ch <- prometheus.MustNewConstMetric(tunnelBFDUpDesc, prometheus.GaugeValue, bfdUp(t.BFDStatus), t.Name, t.Options["remote_ip"])
	}
	ch <- prometheus.MustNewConstMetric(tunnelsDesc, prometheus.GaugeValue, float64(len(tunnels)))
	for state, n := range byState {
		ch <- prometheus.MustNewConstMetric(tunnelsBFDDesc, prometheus.GaugeValue, float64(n), state)
	}
}

// bfdSessions reads the node's tunnels' BFD sessions for NodeConditionTunnelsUp: how many
// there are and the remote addresses of those not up and forwarding (sorted, comma-separated).
// read is false while the database does not answer (its cache may be stale then).
func (h *NodeHealth) bfdSessions(ctx context.Context) (read bool, sessions int, notUp string) {
	if h.OVSClient == nil || (h.OVS != nil && !h.OVS.Answers()) {
		return false, 0, ""
	}
	ctx, cancel := context.WithTimeout(ctx, ovsHealthTimeout)
	defer cancel()
	tunnels, err := findTunnels(ctx, h.OVSClient)
	if err != nil {
		return false, 0, ""
	}
	var down []string
	for _, t := range tunnels {
		if _, ok := t.BFDStatus["state"]; !ok {
			continue
		}
		sessions++
		if bfdUp(t.BFDStatus) == 0 {
			down = append(down, cmp.Or(t.Options["remote_ip"], t.Name))
		}
	}
	slices.Sort(down)
	return true, sessions, strings.Join(down, ",")
}

// bfdUp is 1 for a session that is up and forwarding. OVS reports forwarding apart from the
// state: an up session can still not forward (forwarding_if_rx, or a forced bfd/set-forwarding
// false), and OVN's gateway failover follows forwarding.
func bfdUp(status map[string]string) float64 {
	if status["state"] != "up" {
		return 0
	}
	if f, ok := status["forwarding"]; ok && f != "true" {
		return 0
	}
	return 1
}

// countOpenFlowFlows counts the flows in ovs-vswitchd's bridge/dump-flows reply that a
// controller sees. Its format (ofproto.c's flow_stats_ds) is one line per flow:
//
//	duration=58s, n_packets=2, n_bytes=160, priority=100,in_port=1,actions=resubmit(,8)
//	table_id=8, duration=58s, n_packets=0, n_bytes=0, priority=0,actions=drop
//
// "table_id=N, " only outside table 0, "priority=N," only when not the default 32768, and no
// cookie (OVS 3.1, captured): so neither "table_id=" nor "priority=" starts every flow line,
// "duration=" does, after the optional table prefix. It is matched at that position, not
// anywhere in the line, so nothing inside a match or an action passes for a flow. Lines of
// another shape are skipped; a reply with no flow line at all is an error, since every
// ofproto-dpif bridge has its table-254 flows: such a reply was not understood.
func countOpenFlowFlows(out string) (int, error) {
	n, lines := 0, 0
	for line := range strings.Lines(out) {
		flow, hidden := parseFlowLine(strings.TrimRight(line, "\r\n"))
		if flow {
			lines++
		}
		if flow && !hidden {
			n++
		}
	}
	if lines == 0 {
		return 0, errors.New("bridge/dump-flows: no flow line in the reply")
	}
	return n, nil
}

// parseFlowLine reports whether line is one flow of bridge/dump-flows, and whether OVS hides
// that flow from controllers: those in its internal table, and those of a priority above
// 65535, which ofproto installs itself (in-band control, fail-open) and no controller can.
func parseFlowLine(line string) (flow, hidden bool) {
	rest, table := line, 0
	if head, tail, ok := strings.Cut(line, ", "); ok && strings.HasPrefix(head, "table_id=") {
		n, err := strconv.Atoi(strings.TrimPrefix(head, "table_id="))
		if err != nil {
			return false, false
		}
		rest, table = tail, n
	}
	if !strings.HasPrefix(rest, "duration=") {
		return false, false
	}
	if table == hiddenFlowTable {
		return true, true
	}
	// The match follows the counters: "n_bytes=N, " then "priority=N," if not the default.
	_, match, ok := strings.Cut(rest, "n_bytes=")
	if !ok {
		return true, false
	}
	_, match, _ = strings.Cut(match, ", ")
	if p, ok := strings.CutPrefix(match, "priority="); ok {
		digits, _, _ := strings.Cut(p, ",")
		if prio, err := strconv.Atoi(digits); err == nil && prio > 65535 {
			return true, true
		}
	}
	return true, false
}

// parseUpcallShowFlows sums the current flow counts of ovs-vswitchd's upcall/show reply, one
// block per datapath:
//
//	netdev@ovs-netdev:
//	  flows         : (current 2) (avg 1) (max 2) (limit 10000)
//	  dump duration : 1ms
//
// OVS 3.1 indents with two spaces (captured), older versions' source with a tab; both are
// trimmed. A reply with no flows line is an error, not 0: kovn always has br-int, so some
// datapath exists.
func parseUpcallShowFlows(out string) (int, error) {
	total, seen := 0, false
	for line := range strings.Lines(out) {
		rest, ok := strings.CutPrefix(strings.TrimSpace(line), "flows")
		if rest = strings.TrimSpace(rest); !ok || !strings.HasPrefix(rest, ":") {
			continue // the block's other fields, the revalidators' "N: (keys N)"
		}
		_, cur, ok := strings.Cut(rest, "(current ")
		if !ok {
			return 0, fmt.Errorf("upcall/show: no current count in %q", strings.TrimSpace(line))
		}
		digits, _, _ := strings.Cut(cur, ")")
		n, err := strconv.Atoi(digits)
		if err != nil {
			return 0, fmt.Errorf("upcall/show: %q: %w", strings.TrimSpace(line), err)
		}
		total, seen = total+n, true
	}
	if !seen {
		return 0, errors.New("upcall/show: no datapath's flows line in the reply")
	}
	return total, nil
}
