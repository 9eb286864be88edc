package e2e

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kovn/kovn/test/rig"
)

// chartICDatabases: the chart's interconnect.databases (cluster 1 serving a clusterset's IC-NB
// and IC-SB, OVN_ClusterSet beside IC-SB) take mutual TLS only, with their own certificate from
// the clusterset's CA: an AZ's certificate opens both and writes IC-NB, a plain client and a
// certificate from another CA are refused, IC-SB's relay lets an AZ's certificate write its own
// AZ's row and not another's, and every raft cluster speaks ssl.
func chartICDatabases(t *testing.T, cfg rig.Config) {
	ns, az, forged := cfg.NodeNS(1, 2), cfg.AZTLS(1), otherCAIdentity(t, rig.AZName(1))
	central := cfg.NodeIPs(1, 1)[0].String()
	for _, s := range []struct {
		what string
		port int
		dbs  []string
	}{{"IC-NB", rig.PortICNB, []string{"OVN_IC_Northbound"}}, {"IC-SB", rig.PortICSB, []string{"OVN_IC_Southbound", "OVN_ClusterSet"}}} {
		hp := hostPort(central, s.port)
		if err := eventually(60*time.Second, func() error {
			out, err := ovsdbAs(ns, az, "ovsdb-client", "list-dbs", "ssl:"+hp)
			for _, db := range s.dbs {
				if err != nil || !strings.Contains(out, db) {
					return fmt.Errorf("%s at %s with %s's certificate: %v %s, want %v", s.what, hp, rig.AZName(1), err, out, s.dbs)
				}
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if out, err := ovsdbAs(ns, rig.OVSDBTLS{}, "ovsdb-client", "list-dbs", "tcp:"+hp); err == nil {
			t.Errorf("%s at %s answered a plain TCP client: %s", s.what, hp, out)
		}
		if out, err := ovsdbAs(ns, forged, "ovsdb-client", "list-dbs", "ssl:"+hp); err == nil {
			t.Errorf("%s at %s answered a certificate from another CA: %s", s.what, hp, out)
		}
	}
	icnb := "--db=ssl:" + hostPort(central, rig.PortICNB)
	if out, err := ovsdbAs(ns, az, "ovn-ic-nbctl", icnb, "ts-add", "kovn-e2e-chart-ts"); err != nil {
		t.Errorf("%s's certificate creating a transit switch in the chart's IC-NB: %v %s", rig.AZName(1), err, out)
	} else if out, err := ovsdbAs(ns, az, "ovn-ic-nbctl", icnb, "ts-del", "kovn-e2e-chart-ts"); err != nil {
		t.Errorf("deleting it: %v %s", err, out)
	}
	// IC-SB is kovn's authorizing relay: az1's certificate may make its own AZ row, not az2's.
	icsb := "ssl:" + hostPort(central, rig.PortICSB)
	own := `["OVN_IC_Southbound",{"op":"insert","table":"Availability_Zone","row":{"name":"az1"}}]`
	if out, err := ovsdbAs(ns, az, "ovsdb-client", "transact", icsb, strings.Replace(own, "az1", rig.AZName(2), 1)); !strings.Contains(out, "permission error") {
		t.Errorf("%s's certificate making AZ %s in the chart's IC-SB: %v %s, want a permission error", rig.AZName(1), rig.AZName(2), err, out)
	}
	if out, err := ovsdbAs(ns, az, "ovsdb-client", "transact", icsb, own); err != nil || strings.Contains(out, "error") {
		t.Errorf("%s's certificate making its own AZ row in the chart's IC-SB: %v %s", rig.AZName(1), err, out)
	} else if out, err := ovsdbAs(ns, az, "ovsdb-client", "transact", icsb,
		`["OVN_IC_Southbound",{"op":"delete","table":"Availability_Zone","where":[["name","==","az1"]]}]`); err != nil || !strings.Contains(out, `"count":1`) {
		t.Errorf("deleting it: %v %s", err, out)
	}
	run := filepath.Join(cfg.NodeDir(1, 1), "host", "ovn-run")
	for _, db := range []struct{ server, name string }{
		{"ovn_ic_nb_db", "OVN_IC_Northbound"}, {"ovn_ic_sb_db", "OVN_IC_Southbound"}, {"ovn_ic_sb_db", "OVN_ClusterSet"}} {
		out, err := exec.Command("ovs-appctl", "-t", filepath.Join(run, db.server+".ctl"), "cluster/status", db.name).CombinedOutput()
		if err != nil || !strings.Contains(string(out), "Address: ssl:") {
			t.Errorf("%s's raft cluster: %v %s, want an ssl: address", db.name, err, out)
		}
	}
}
