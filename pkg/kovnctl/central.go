package kovnctl

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/prometheus/common/expfmt"

	"github.com/kovn/kovn/pkg/metricsauth"
)

// CentralMember is one central node's view of one of the databases it serves, as its
// kovn-ovn-monitor reads it.
type CentralMember struct {
	Node   string `json:"node"`
	DB     string `json:"db"` // nb, sb, ic-nb, ic-sb
	Up     bool   `json:"up"`
	Role   string `json:"role,omitempty"`   // leader, follower, candidate; "" standalone or down
	Server string `json:"server,omitempty"` // short raft server ID
	Leader string `json:"leader,omitempty"` // as this member knows it
	// ClusterMember: the server is a member of its raft cluster (kovn_ovn_db_raft_cluster_member).
	ClusterMember bool `json:"clusterMember,omitempty"`
	Term          int  `json:"term,omitempty"`
	Members       int  `json:"members,omitempty"`
	Connected     int  `json:"connected,omitempty"`
}

// CentralScrape is what ScrapeCentral read: each answering node's members and northd status,
// and the nodes whose monitor did not answer.
type CentralScrape struct {
	Members  []CentralMember
	Northd   map[string]string // node -> active, standby, paused; "" when it does not answer
	Answered int
	Silent   []string
}

// ScrapeCentral reads every running OVN central pod's kovn-ovn-monitor (pods/exec of its
// --get-metrics: it listens on the node's loopback only).
// Not-ready pods too: a central pod is not ready while its NB member is down, which is when
// its view matters. No central pod (OVN central run elsewhere): an empty scrape.
func ScrapeCentral(ctx context.Context, e *Execer) (CentralScrape, error) {
	out := CentralScrape{Northd: map[string]string{}}
	var err error
	argv := []string{"/kovn-ovn-monitor", "--" + metricsauth.GetMetricsFlag}
	out.Answered, out.Silent, err = scrapePods(ctx, e, CentralApp, false, argv, func(node string, raw []byte) error {
		members, northd, err := ParseCentral(node, raw)
		if err == nil {
			out.Members = append(out.Members, members...)
			out.Northd[node] = northd
		}
		return err
	})
	sort.Slice(out.Members, func(i, j int) bool {
		a, b := out.Members[i], out.Members[j]
		return a.DB+"|"+a.Node < b.DB+"|"+b.Node
	})
	return out, err
}

// ParseCentral reads a kovn-ovn-monitor's metrics text: one member per database it exports,
// and the status of its northd ("" when none is exported as 1).
func ParseCentral(node string, raw []byte) ([]CentralMember, string, error) {
	var parser expfmt.TextParser
	families, err := parser.TextToMetricFamilies(bytes.NewReader(raw))
	if err != nil {
		return nil, "", err
	}
	if families["kovn_ovn_db_up"] == nil {
		return nil, "", fmt.Errorf("no kovn_ovn_db_up: not a kovn-ovn-monitor")
	}
	byDB := map[string]*CentralMember{}
	northd := ""
	for name, f := range families {
		for _, m := range f.GetMetric() {
			l := map[string]string{}
			for _, lp := range m.GetLabel() {
				l[lp.GetName()] = lp.GetValue()
			}
			v := m.GetGauge().GetValue()
			if name == "kovn_ovn_daemon_status" && l["daemon"] == "northd" && v == 1 {
				northd = l["status"]
			}
			db, ok := l["db"]
			if !ok {
				continue
			}
			cm := byDB[db]
			if cm == nil {
				cm = &CentralMember{Node: node, DB: db}
				byDB[db] = cm
			}
			setCentral(cm, name, l, v)
		}
	}
	var out []CentralMember
	for _, cm := range byDB {
		out = append(out, *cm)
	}
	return out, northd, nil
}

func setCentral(cm *CentralMember, series string, l map[string]string, v float64) {
	switch series {
	case "kovn_ovn_db_up":
		cm.Up = v == 1
	case "kovn_ovn_db_raft_role":
		if v == 1 {
			cm.Role = l["role"]
		}
	case "kovn_ovn_db_raft_leader":
		cm.Server, cm.Leader = l["server"], l["leader"]
	case "kovn_ovn_db_raft_cluster_member":
		cm.ClusterMember = v == 1
	case "kovn_ovn_db_raft_term":
		cm.Term = int(v)
	case "kovn_ovn_db_raft_members":
		cm.Members = int(v)
	case "kovn_ovn_db_raft_connected_members":
		cm.Connected = int(v)
	}
}

// central: a database server that does not answer, a raft member that reaches fewer members
// than the cluster has, a database no answering member names a leader of, and no (or more
// than one) active ovn-northd are problems.
func (r *Report) central(in Inputs) {
	c := in.Central
	r.Central = c.Members
	for _, n := range c.Silent {
		r.problem("central/"+n, fmt.Sprintf("the kovn-ovn-monitor of the OVN central pod on %s does not answer (pods/exec) within %s", n, ScrapeTimeout),
			"kubectl -n kube-system logs the kovn-ovn-central pod on "+n+" (container monitor)")
	}
	leaders := map[string][]string{}
	var dbs []string
	for _, m := range c.Members {
		if !slices.Contains(dbs, m.DB) {
			dbs = append(dbs, m.DB)
		}
		switch {
		case !m.Up:
			r.problem("central/"+m.Node+"/"+m.DB, fmt.Sprintf("the %s database server on %s does not answer on its control socket", m.DB, m.Node),
				"kubectl -n kube-system logs the kovn-ovn-central pod on "+m.Node+"; it restarts a server that stops answering")
		case m.Role == "":
		case m.Connected < m.Members:
			r.problem("raft/"+m.DB+"/"+m.Node, fmt.Sprintf("the %s member on %s reaches %d of the %d members: one is stopped or cut off", m.DB, m.Node, m.Connected, m.Members),
				"check every central node's kovn-ovn-central pod (kubectl -n kube-system get pods -l app=kovn-ovn-central -o wide) and the raft ports between the central nodes")
		}
		if m.Up && m.Role == "leader" {
			leaders[m.DB] = append(leaders[m.DB], m.Node)
		}
	}
	for _, db := range dbs {
		if clustered(c.Members, db) && len(leaders[db]) == 0 {
			r.problem("raft/"+db, fmt.Sprintf("no answering %s member leads: the database takes no writes", db),
				"a raft cluster needs a majority of its members: start the stopped ones")
		}
	}
	r.northd(c)
}

// clustered says whether any answering member of db is a raft member.
func clustered(members []CentralMember, db string) bool {
	return slices.ContainsFunc(members, func(m CentralMember) bool { return m.DB == db && m.Up && m.Role != "" })
}

func (r *Report) northd(c CentralScrape) {
	if c.Answered == 0 {
		return
	}
	var active []string
	for node, s := range c.Northd {
		if s == "active" {
			active = append(active, node)
		}
	}
	sort.Strings(active)
	switch {
	case len(active) == 0:
		r.problem("ovn-northd", fmt.Sprintf("no ovn-northd is active on the %d answering central nodes: logical flows are not recomputed", c.Answered),
			"check the northd containers of the kovn-ovn-central pods and their connection to the SB database")
	case len(active) > 1:
		r.problem("ovn-northd", "ovn-northd is active on "+strings.Join(active, ", ")+": two hold the SB lock",
			"check that every central node's northd talks to the same SB raft cluster")
	}
}
