package e2e

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/kovn/kovn/test/rig"
)

// tamperedICSB: cluster 2's AZ certificate tries to write, under c1's AZ name in IC-SB, what
// every peer would believe and install at once: a route to a part of c1's subnet via cluster
// 2's transit address, and a gateway whose tunnel endpoint is no node of c1. The IC-SB relay
// refuses it (a permission error; nothing written, so no peer installs anything). Written
// past the relay (on the databases' host: a deployment without the relay, or a compromised
// host), c1's kovn removes both and reports them (Degraded naming each, the restored counter)
// within one resync. Then an AZ is made up on kovn's transit switch: refused through the
// relay, and, written on the host, reported by c1 as unknown (no join record) until gone.
func tamperedICSB(t *testing.T, c1 *cluster, cfg rig.Config) {
	get := func(path string) string {
		out, err := c1.kubectl("get", "interconnect", "default", "-o", "jsonpath="+path)
		if err != nil {
			t.Fatalf("kubectl get interconnect: %v %s", err, out)
		}
		return strings.TrimSpace(out)
	}
	az := get("{.status.azName}")
	query := func(table string, where ...string) []map[string]any {
		t.Helper()
		cond := "[" + strings.Join(where, ",") + "]"
		out, err := exec.Command("ovsdb-client", "--timeout=10", "query", cfg.ICSBLocal(),
			fmt.Sprintf(`["OVN_IC_Southbound",{"op":"select","table":%q,"where":%s}]`, table, cond)).CombinedOutput()
		if err != nil {
			t.Fatalf("reading IC-SB %s: %v %s", table, err, out)
		}
		var res []struct{ Rows []map[string]any }
		if err := json.Unmarshal(out, &res); err != nil || len(res) != 1 {
			t.Fatalf("IC-SB %s: %v %s", table, err, out)
		}
		return res[0].Rows
	}
	zones := query("Availability_Zone", fmt.Sprintf(`["name","==",%q]`, az))
	if len(zones) != 1 {
		t.Fatalf("AZ %s in IC-SB: %v", az, zones)
	}
	azUUID := zones[0]["_uuid"].([]any)[1].(string)
	// A part of a subnet c1 advertises (inside what it declared, so the peers' declared-subnet
	// filter would let it through), via an address of another AZ's transit port.
	var victim, nexthop string
	for _, r := range query("Route", `["transit_switch","==","kovn-ts"]`) {
		p, err := netip.ParsePrefix(r["ip_prefix"].(string))
		switch {
		case err != nil || !p.Addr().Is4():
		case r["availability_zone"].([]any)[1] == azUUID && p.Bits() <= 24:
			victim = netip.PrefixFrom(p.Addr(), 28).Masked().String()
		case r["availability_zone"].([]any)[1] != azUUID:
			nexthop = r["nexthop"].(string)
		}
	}
	if victim == "" || nexthop == "" {
		t.Fatalf("no IPv4 route of %s (%q) or of another AZ (nexthop %q) on kovn-ts", az, victim, nexthop)
	}
	txn := fmt.Sprintf(`["OVN_IC_Southbound",`+
		`{"op":"insert","table":"Route","row":{"availability_zone":["uuid",%[1]q],"transit_switch":"kovn-ts","ip_prefix":%[2]q,"nexthop":%[3]q,"origin":"connected"}},`+
		`{"op":"insert","table":"Encap","uuid-name":"e","row":{"gateway_name":"evil-gw","ip":"192.0.2.250","type":"geneve"}},`+
		`{"op":"insert","table":"Gateway","row":{"name":"evil-gw","hostname":"evil-gw","availability_zone":["uuid",%[1]q],"encaps":["named-uuid","e"]}}]`,
		azUUID, victim, nexthop)
	tamper(t, cfg, txn, "writing a route and a gateway under "+az+"'s name")
	if rows := query("Route", fmt.Sprintf(`["ip_prefix","==",%q]`, victim)); len(rows) > 0 {
		t.Fatalf("the forged route is in IC-SB: %v", rows)
	}
	tamperOnHost(t, cfg, txn)
	tampered := time.Now()
	var msg string
	if err := eventually(30*time.Second, func() error {
		msg = get(`{.status.conditions[?(@.type=="Degraded")].message}`)
		for _, want := range []string{"a route to " + victim + " via " + nexthop, `a gateway "evil-gw"`} {
			if !strings.Contains(msg, want) {
				return fmt.Errorf("Degraded does not name %q: %q", want, msg)
			}
		}
		if rows := query("Route", fmt.Sprintf(`["ip_prefix","==",%q]`, victim)); len(rows) > 0 {
			return fmt.Errorf("the route is still in IC-SB: %v", rows)
		}
		if rows := query("Gateway", `["name","==","evil-gw"]`); len(rows) > 0 {
			return fmt.Errorf("the gateway is still in IC-SB: %v", rows)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	t.Logf("a route to %s via %s and a gateway written under %s's name on the IC-SB host; gone and reported %.1fs later: %s",
		victim, nexthop, az, time.Since(tampered).Seconds(), msg)
	c1.waitReadyAfterRepair(t)

	// An AZ made up with az2's certificate, with a route on kovn's transit switch and no join
	// record: reported once it stayed 10 s, and no more once it is gone.
	rogue := fmt.Sprintf(`["OVN_IC_Southbound",`+
		`{"op":"insert","table":"Availability_Zone","uuid-name":"z","row":{"name":"az-rogue"}},`+
		`{"op":"insert","table":"Route","row":{"availability_zone":["named-uuid","z"],"transit_switch":"kovn-ts","ip_prefix":"198.51.100.0/24","nexthop":%q,"origin":"connected"}}]`, nexthop)
	tamper(t, cfg, rogue, "making up AZ az-rogue")
	tamperOnHost(t, cfg, rogue)
	made := time.Now()
	degraded := func() (string, string) {
		return get(`{.status.conditions[?(@.type=="Degraded")].reason}`), get(`{.status.conditions[?(@.type=="Degraded")].message}`)
	}
	if err := eventually(40*time.Second, func() error {
		if reason, msg := degraded(); reason != "UnknownAZ" || !strings.Contains(msg, "AZ az-rogue on kovn's transit switches") {
			return fmt.Errorf("Degraded %s: %q", reason, msg)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	t.Logf("az-rogue (no join record) reported %.1fs after it appeared", time.Since(made).Seconds())
	tamperOnHost(t, cfg, `["OVN_IC_Southbound",{"op":"delete","table":"Route","where":[["ip_prefix","==","198.51.100.0/24"]]},`+
		`{"op":"delete","table":"Availability_Zone","where":[["name","==","az-rogue"]]}]`)
	if err := eventually(30*time.Second, func() error {
		if reason, msg := degraded(); reason == "UnknownAZ" {
			return fmt.Errorf("Degraded %s: %q", reason, msg)
		}
		return nil
	}); err != nil {
		t.Error(err)
	}
}

// tamper sends txn through the IC-SB relay with cluster 2's AZ certificate: it must be
// refused with a permission error.
func tamper(t *testing.T, cfg rig.Config, txn, what string) {
	t.Helper()
	out, err := ovsdbAs(cfg.NodeNS(2, 1), cfg.AZTLS(2), "ovsdb-client", "transact", cfg.ICSBEndpoint(), txn)
	if !strings.Contains(out, "permission error") {
		t.Fatalf("az2's certificate %s through the IC-SB relay: %v %s, want a permission error", what, err, out)
	}
	t.Logf("az2's certificate %s: refused by the IC-SB relay: %s", what, out)
}

// tamperOnHost applies txn on the IC-SB server's own unix socket, past the relay.
func tamperOnHost(t *testing.T, cfg rig.Config, txn string) {
	t.Helper()
	out, err := exec.Command("ovsdb-client", "--timeout=10", "transact", strings.Split(cfg.ICSBLocal(), ",")[0], txn).CombinedOutput()
	if err != nil || strings.Contains(string(out), `"error"`) {
		t.Fatalf("writing IC-SB on its host: %v %s", err, out)
	}
}

// waitReadyAfterRepair: the InterConnect is Ready again soon after a repair (a pass may first
// wait, as on any change, for the gateways to install what it rewrote).
func (c *cluster) waitReadyAfterRepair(t *testing.T) {
	t.Helper()
	var s icStatus
	if err := eventually(30*time.Second, func() error {
		if s = c.interConnectStatus(); s.ready != "True" {
			return fmt.Errorf("Ready %s (%s)", s.ready, s.message)
		}
		return nil
	}); err != nil {
		t.Errorf("%s after the repair: %v", c.info.Name, err)
	}
}
