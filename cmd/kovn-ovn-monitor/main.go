// kovn-ovn-monitor exports the health of OVN central on one central node: each database
// server's raft role, leader, term, members, connected members, log and file size, and
// whether ovn-northd (and ovn-ic) is active, standby or paused. It runs beside them in the
// chart's ovn-central pod and reads their control sockets at each scrape.
//
//	kovn-ovn-monitor [--run-dir /var/run/ovn] [--data-dir /data] [--interconnect-databases] [--ovn-ic]
//	kovn-ovn-monitor --database LABEL=SCHEMA:CTL[:FILE]... [--daemon LABEL=CTL]... --nb-cfg-probe-interval 0
//
// The first form reads the chart's sockets and files; the second any servers (the lab's IC
// database members are read this way).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/ovn-org/libovsdb/client"
	"github.com/ovn-org/libovsdb/model"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/kovn/kovn/pkg/metricsauth"
	"github.com/kovn/kovn/pkg/ovn"
	"github.com/kovn/kovn/pkg/ovn/model/nb"
	"github.com/kovn/kovn/pkg/ovn/model/sb"
	"github.com/kovn/kovn/pkg/ovnmonitor"
)

func main() {
	runDir := flag.String("run-dir", "/var/run/ovn", "where the OVN daemons' control sockets are (NAME.ctl)")
	dataDir := flag.String("data-dir", "/data", "where the database files are (NAME.db)")
	icDBs := flag.Bool("interconnect-databases", false, "this node serves IC-NB and IC-SB members too")
	ic := flag.Bool("ovn-ic", false, "this node runs ovn-ic")
	probe := flag.Duration("nb-cfg-probe-interval", 30*time.Second, "bump NB_Global.nb_cfg this often while this node's ovn-northd is active, and export each chassis's lag behind it (0: neither)")
	var dbFlags, daemonFlags listFlag
	flag.Var(&dbFlags, "database", "LABEL=SCHEMA:CTL[:FILE]: read this database server instead of the chart's (repeatable)")
	flag.Var(&daemonFlags, "daemon", "LABEL=CTL: with --database, an OVN daemon with an HA status to read (repeatable)")
	// Loopback by default: the monitor has no identity to review a scraper's token with, and
	// its metrics name every database member; kubectl kovn reads them through pods/exec.
	addr := flag.String("metrics-bind-address", "127.0.0.1:9478", "Prometheus metrics address, plain HTTP: "+
		"a loopback address unless anything that reaches it may read the databases' raft state")
	getMetrics := flag.Bool(metricsauth.GetMetricsFlag, false, "print the metrics of the running monitor (--metrics-bind-address) and exit")
	probeAddr := flag.String("health-probe-bind-address", ":9479", "/livez and /readyz address, independent of metrics")
	flag.Parse()
	if *getMetrics {
		if err := metricsauth.PrintLocal(*addr); err != nil {
			fmt.Fprintln(os.Stderr, "kovn-ovn-monitor:", err)
			os.Exit(1)
		}
		return
	}

	c := collector(*runDir, *dataDir, *icDBs, *ic)
	if len(dbFlags) > 0 {
		var err error
		if c, err = explicitCollector(dbFlags, daemonFlags); err != nil {
			fmt.Fprintln(os.Stderr, "kovn-ovn-monitor:", err)
			os.Exit(2)
		}
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(c, collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	probes := http.NewServeMux()
	probes.HandleFunc("/livez", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
	// Ready while this node's NB member answers: the pod is then a working central member.
	probes.HandleFunc("/readyz", func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
		defer cancel()
		if _, err := ovn.Unixctl(ctx, c.DBs[0].Ctl, "version"); err != nil {
			http.Error(w, "the NB database server does not answer: "+err.Error(), http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ok")
	})
	srv := &http.Server{Addr: *addr, Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	probeSrv := &http.Server{Addr: *probeAddr, Handler: probes, ReadHeaderTimeout: 5 * time.Second}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	go func() {
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = srv.Shutdown(shutdown)
		_ = probeSrv.Shutdown(shutdown)
	}()
	go func() {
		if err := probeSrv.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
			fmt.Fprintln(os.Stderr, "kovn-ovn-monitor: probes:", err)
			os.Exit(1)
		}
	}()
	if *probe > 0 {
		go watchNbCfg(ctx, c, *runDir, *probe)
	}
	fmt.Fprintf(os.Stderr, "kovn-ovn-monitor: serving %d databases and %d daemons on %s\n", len(c.DBs), len(c.Daemons), *addr)
	if err := srv.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
		fmt.Fprintln(os.Stderr, "kovn-ovn-monitor:", err)
		os.Exit(1)
	}
}

// collector names the chart's sockets and files: NB and SB always, the IC databases and
// ovn-ic when this node has them.
func collector(runDir, dataDir string, icDBs, ic bool) *ovnmonitor.Collector {
	type db struct{ label, schema, file string }
	dbs := []db{{"nb", "OVN_Northbound", "ovnnb_db"}, {"sb", "OVN_Southbound", "ovnsb_db"}}
	if icDBs {
		dbs = append(dbs, db{"ic-nb", "OVN_IC_Northbound", "ovn_ic_nb_db"}, db{"ic-sb", "OVN_IC_Southbound", "ovn_ic_sb_db"})
	}
	c := &ovnmonitor.Collector{Daemons: []ovnmonitor.Daemon{{Label: "northd", Ctl: filepath.Join(runDir, "ovn-northd.ctl")}}}
	for _, d := range dbs {
		c.DBs = append(c.DBs, ovnmonitor.DB{Label: d.label, Name: d.schema, Ctl: filepath.Join(runDir, d.file+".ctl"),
			File: filepath.Join(dataDir, d.file+".db")})
	}
	if ic {
		c.Daemons = append(c.Daemons, ovnmonitor.Daemon{Label: "ic", Ctl: filepath.Join(runDir, "ovn-ic.ctl")})
	}
	return c
}

// listFlag is a repeatable string flag.
type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, " ") }
func (l *listFlag) Set(v string) error { *l = append(*l, v); return nil }

// explicitCollector reads the servers and daemons named on the command line.
func explicitCollector(dbs, daemons []string) (*ovnmonitor.Collector, error) {
	c := &ovnmonitor.Collector{}
	for _, d := range dbs {
		label, spec, ok := strings.Cut(d, "=")
		parts := strings.Split(spec, ":")
		if !ok || label == "" || len(parts) < 2 || len(parts) > 3 || parts[0] == "" || parts[1] == "" {
			return nil, fmt.Errorf("--database %q: want LABEL=SCHEMA:CTL[:FILE]", d)
		}
		db := ovnmonitor.DB{Label: label, Name: parts[0], Ctl: parts[1]}
		if len(parts) == 3 {
			db.File = parts[2]
		}
		c.DBs = append(c.DBs, db)
	}
	for _, d := range daemons {
		label, ctl, ok := strings.Cut(d, "=")
		if !ok || label == "" || ctl == "" {
			return nil, fmt.Errorf("--daemon %q: want LABEL=CTL", d)
		}
		c.Daemons = append(c.Daemons, ovnmonitor.Daemon{Label: label, Ctl: ctl})
	}
	return c, nil
}

// watchNbCfg connects to this node's NB and SB members (as soon as they serve; until then the
// lag series are absent), then exports the chassis' nb_cfg lag and bumps nb_cfg every probe.
func watchNbCfg(ctx context.Context, c *ovnmonitor.Collector, runDir string, probe time.Duration) {
	connect := func(db string, m model.ClientDBModel, table model.Model) client.Client {
		c, err := ovn.Connect(ctx, m, ovn.Config{Endpoints: []string{"unix:" + filepath.Join(runDir, db+".sock")},
			ConnectTimeout: 5 * time.Second, MaxRetryInterval: 5 * time.Second}, table)
		if err != nil {
			fmt.Fprintln(os.Stderr, "kovn-ovn-monitor:", err)
		}
		return c
	}
	nbModel, err := nb.FullDatabaseModel()
	if err != nil {
		panic(err)
	}
	sbModel, err := sb.FullDatabaseModel()
	if err != nil {
		panic(err)
	}
	nbc := connect("ovnnb_db", nbModel, &nb.NBGlobal{})
	if nbc == nil {
		return
	}
	sbc := connect("ovnsb_db", sbModel, &sb.ChassisPrivate{})
	if sbc == nil {
		return
	}
	n := &ovnmonitor.NbCfg{NB: nbc, SB: sbc, NorthdCtl: filepath.Join(runDir, "ovn-northd.ctl")}
	c.NbCfg.Store(n)
	n.Probe(ctx, probe)
}
