// Package ovnmonitor exports the health of OVN central (what kube-ovn-monitor exports): each
// database server's raft state and file size, and whether ovn-northd and ovn-ic hold their
// active role. It reads the daemons' control sockets at scrape time (cluster/status, status),
// so a scrape shows the state of that moment and a stopped daemon shows as down.
package ovnmonitor

import (
	"context"
	"errors"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kovn/kovn/pkg/ovn"
)

// DB is one database served by an ovsdb-server on this central node.
type DB struct {
	Label string // the db label: nb, sb, ic-nb, ic-sb
	Name  string // its schema name, e.g. OVN_Northbound
	Ctl   string // the server's control socket
	File  string // the database file; empty: no file size
}

// Daemon is an OVN daemon with an active/standby role (ovn-northd, ovn-ic).
type Daemon struct {
	Label string // the daemon label: northd, ic
	Ctl   string
}

// Collector is a prometheus.Collector reading the DBs and Daemons at each scrape.
type Collector struct {
	DBs     []DB
	Daemons []Daemon
	Timeout time.Duration // per control-socket read; zero: 2 s
	// NbCfg, once stored (its NB and SB members may serve later than the monitor starts),
	// adds the nb_cfg series to each scrape that reads the daemon labelled northd active.
	NbCfg atomic.Pointer[NbCfg]
}

// raftRoles and daemonStates are the values of the one-hot role and status series: each has
// a series per value, 1 for the current one, so a dashboard can count leaders or actives.
var (
	raftRoles    = []string{"leader", "follower", "candidate"}
	daemonStates = []string{"active", "standby", "paused"}
)

var (
	dbUp = prometheus.NewDesc("kovn_ovn_db_up",
		"1 while this central node's ovsdb-server serving the database answers on its control socket.", []string{"db"}, nil)
	dbFileBytes = prometheus.NewDesc("kovn_ovn_db_file_bytes",
		"Size of the database file on this central node (a raft member's file holds its log until compaction).", []string{"db"}, nil)
	raftRole = prometheus.NewDesc("kovn_ovn_db_raft_role",
		"1 for this raft member's current role (leader, follower, candidate), 0 for the others.", []string{"db", "role"}, nil)
	raftLeader = prometheus.NewDesc("kovn_ovn_db_raft_leader",
		"1, labelled with this member's short server ID and the leader's as this member knows it (empty: none known).",
		[]string{"db", "server", "leader"}, nil)
	raftClusterMember = prometheus.NewDesc("kovn_ovn_db_raft_cluster_member",
		"1 while this member's raft status is \"cluster member\" (0 while joining, leaving or disconnected).", []string{"db"}, nil)
	raftTerm = prometheus.NewDesc("kovn_ovn_db_raft_term",
		"This member's current raft term: it grows with each election.", []string{"db"}, nil)
	raftMembers = prometheus.NewDesc("kovn_ovn_db_raft_members",
		"Servers in the raft cluster's configuration, as this member knows it.", []string{"db"}, nil)
	raftConnected = prometheus.NewDesc("kovn_ovn_db_raft_connected_members",
		"Members this one has an established connection to, itself included.", []string{"db"}, nil)
	raftLogEntries = prometheus.NewDesc("kovn_ovn_db_raft_log_entries",
		"Entries in this member's raft log (since its last snapshot).", []string{"db"}, nil)
	raftUncommitted = prometheus.NewDesc("kovn_ovn_db_raft_uncommitted_entries",
		"Entries of this member's log not yet committed by the cluster.", []string{"db"}, nil)
	raftUnapplied = prometheus.NewDesc("kovn_ovn_db_raft_unapplied_entries",
		"Committed entries this member has not applied to its database yet.", []string{"db"}, nil)
	daemonUp = prometheus.NewDesc("kovn_ovn_daemon_up",
		"1 while this central node's daemon (northd, ic) answers on its control socket.", []string{"daemon"}, nil)
	daemonStatus = prometheus.NewDesc("kovn_ovn_daemon_status",
		"1 for the daemon's current HA status (active: holds the southbound lock; standby; paused), 0 for the others.",
		[]string{"daemon", "status"}, nil)
)

// Describe implements prometheus.Collector.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{dbUp, dbFileBytes, raftRole, raftLeader, raftClusterMember, raftTerm, raftMembers,
		raftConnected, raftLogEntries, raftUncommitted, raftUnapplied, daemonUp, daemonStatus, nbCfg, chassisLag} {
		ch <- d
	}
}

// Collect implements prometheus.Collector: every socket is read at once, so one stopped
// daemon costs a scrape one timeout, not one per daemon.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	timeout := c.Timeout
	if timeout == 0 {
		timeout = 2 * time.Second
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var wg sync.WaitGroup
	for _, db := range c.DBs {
		wg.Add(1)
		go func() { defer wg.Done(); collectDB(ctx, db, ch) }()
	}
	for _, d := range c.Daemons {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if collectDaemon(ctx, d, ch) == "active" && d.Label == "northd" {
				if n := c.NbCfg.Load(); n != nil {
					n.collect(ctx, ch)
				}
			}
		}()
	}
	wg.Wait()
}

func gauge(ch chan<- prometheus.Metric, d *prometheus.Desc, v float64, labels ...string) {
	ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
}

func boolean(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// collectDB exports one database's series. A standalone server has no cluster/status
// command: it answers with an error, so it is up and has no raft series.
func collectDB(ctx context.Context, db DB, ch chan<- prometheus.Metric) {
	if db.File != "" {
		if fi, err := os.Stat(db.File); err == nil {
			gauge(ch, dbFileBytes, float64(fi.Size()), db.Label)
		}
	}
	s, err := ovn.ClusterStatus(ctx, db.Ctl, db.Name)
	var refused *ovn.UnixctlError
	gauge(ch, dbUp, boolean(err == nil || errors.As(err, &refused)), db.Label)
	if err != nil {
		return
	}
	for _, r := range raftRoles {
		gauge(ch, raftRole, boolean(s.Role == r), db.Label, r)
	}
	gauge(ch, raftLeader, 1, db.Label, s.ServerID, s.Leader)
	gauge(ch, raftClusterMember, boolean(s.Status == "cluster member"), db.Label)
	gauge(ch, raftTerm, float64(s.Term), db.Label)
	gauge(ch, raftMembers, float64(len(s.Servers)), db.Label)
	gauge(ch, raftConnected, float64(len(s.Connected)), db.Label)
	gauge(ch, raftLogEntries, float64(s.LogEntries), db.Label)
	gauge(ch, raftUncommitted, float64(s.Uncommitted), db.Label)
	gauge(ch, raftUnapplied, float64(s.Unapplied), db.Label)
}

// collectDaemon exports one daemon's series and returns its status ("" when it does not answer).
func collectDaemon(ctx context.Context, d Daemon, ch chan<- prometheus.Metric) string {
	status, err := ovn.DaemonStatus(ctx, d.Ctl)
	gauge(ch, daemonUp, boolean(err == nil), d.Label)
	if err != nil {
		return ""
	}
	for _, s := range daemonStates {
		gauge(ch, daemonStatus, boolean(status == s), d.Label, s)
	}
	return status
}
