package icauthz

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

// fakeView is a View of fixed rows: AZs az1 (uuid u1) and az2 (u2); az1's Route r1 and
// Gateway g1; clusters c1 (az1) and c2 (az2) with exports e1 and e2.
type fakeView struct{}

var fakeAZs = map[string]string{"u1": "az1", "u2": "az2"}

func (fakeView) AZName(uuid string) (string, bool) { n, ok := fakeAZs[uuid]; return n, ok }
func (fakeView) AZUUID(name string) (string, bool) {
	for u, n := range fakeAZs {
		if n == name {
			return u, true
		}
	}
	return "", false
}
func (fakeView) Owner(db, table, uuid string) (string, bool) {
	o, ok := map[string]string{"Route/r1": "u1", "Gateway/g1": "u1", "Availability_Zone/u1": "az1", "Availability_Zone/u2": "az2",
		"Cluster/k1": "az1", "Service_Export/e1": "c1", "Service_Export/e2": "c2",
		"Policy_Pod/p1": "c1", "Policy_Namespace/n1": "c1"}[table+"/"+uuid]
	return o, ok
}
func (fakeView) ClusterAZ(cluster string) (string, bool) {
	az, ok := map[string]string{"c1": "az1", "c2": "az2"}[cluster]
	return az, ok
}

func TestAuthorize(t *testing.T) {
	settle = 0
	az2 := Identity{Names: []string{"az2"}}
	for _, tc := range []struct {
		name, db, op string
		id           Identity
		refused      string // part of the refusal; "" passes
		where        string // part of the rewritten operation
	}{
		{name: "another AZ's route deleted by uuid", db: ICSBDB, id: az2, op: `{"op":"delete","table":"Route","where":[["_uuid","==",["uuid","r1"]]]}`, refused: `Route row r1 is AZ "az1"'s`},
		{name: "another AZ's route changed", db: ICSBDB, id: az2, op: `{"op":"update","table":"Route","where":[["_uuid","==",["uuid","r1"]]],"row":{"nexthop":"169.254.100.9"}}`, refused: `is AZ "az1"'s`},
		{name: "a route inserted under another AZ", db: ICSBDB, id: az2, op: `{"op":"insert","table":"Route","row":{"availability_zone":["uuid","u1"],"ip_prefix":"10.1.0.0/28"}}`, refused: `Route of AZ "az1"`},
		{name: "a route inserted under an unknown AZ", db: ICSBDB, id: az2, op: `{"op":"insert","table":"Route","row":{"availability_zone":["uuid","u9"]}}`, refused: "unknown Availability_Zone u9"},
		{name: "an AZ made up", db: ICSBDB, id: az2, op: `{"op":"insert","table":"Availability_Zone","row":{"name":"az-rogue"}}`, refused: `Availability_Zone for AZ "az-rogue"`},
		{name: "own AZ renamed to a name it does not hold", db: ICSBDB, id: az2, op: `{"op":"update","table":"Availability_Zone","where":[["_uuid","==",["uuid","u2"]]],"row":{"name":"az1"}}`, refused: `for AZ "az1"`},
		{name: "a route moved to another AZ", db: ICSBDB, id: az2, op: `{"op":"update","table":"Route","where":[["ip_prefix","==","x"]],"row":{"availability_zone":["uuid","u1"]}}`, refused: `of AZ "az1"`},
		{name: "an owner mutated", db: ICSBDB, id: az2, op: `{"op":"mutate","table":"Gateway","where":[],"mutations":[["availability_zone","insert",["uuid","u1"]]]}`, refused: "not mutated"},
		{name: "an encap changed", db: ICSBDB, id: az2, op: `{"op":"update","table":"Encap","where":[],"row":{"ip":"192.0.2.1"}}`, refused: "never updated directly"},
		{name: "IC_SB_Global written", db: ICSBDB, id: az2, op: `{"op":"update","table":"IC_SB_Global","where":[],"row":{"options":["map",[]]}}`, refused: "host only"},
		{name: "another database", db: "OVN_Northbound", id: az2, op: `{"op":"insert","table":"Logical_Switch","row":{}}`, refused: "not written through"},
		{name: "another cluster's export deleted", db: ClusterSetDB, id: az2, op: `{"op":"delete","table":"Service_Export","where":[["_uuid","==",["uuid","e1"]]]}`, refused: `is AZ "az1"'s`},
		{name: "an export inserted for another cluster", db: ClusterSetDB, id: az2, op: `{"op":"insert","table":"Service_Export","row":{"cluster":"c1","name":"x"}}`, refused: `cluster "c1" (AZ "az1")`},
		{name: "a pod published under another cluster", db: ClusterSetDB, id: az2, op: `{"op":"insert","table":"Policy_Pod","row":{"cluster":"c1","namespace":"x","name":"a","addresses":"10.16.0.9"}}`, refused: `Policy_Pod of cluster "c1" (AZ "az1")`},
		{name: "another cluster's pod given an address", db: ClusterSetDB, id: az2, op: `{"op":"update","table":"Policy_Pod","where":[["_uuid","==",["uuid","p1"]]],"row":{"addresses":"10.17.0.9"}}`, refused: `is AZ "az1"'s`},
		{name: "another cluster's namespace relabelled", db: ClusterSetDB, id: az2, op: `{"op":"update","table":"Policy_Namespace","where":[["_uuid","==",["uuid","n1"]]],"row":{"labels":["map",[]]}}`, refused: `is AZ "az1"'s`},
		{name: "another AZ's Cluster row taken", db: ClusterSetDB, id: az2, op: `{"op":"update","table":"Cluster","where":[["_uuid","==",["uuid","k1"]]],"row":{"availability_zone":"az2"}}`, refused: `is AZ "az1"'s`},

		{name: "own route inserted", db: ICSBDB, id: az2, op: `{"op":"insert","table":"Route","row":{"availability_zone":["uuid","u2"]}}`},
		{name: "own AZ and its route in one transaction", db: ICSBDB, id: Identity{Names: []string{"az3"}}, op: `{"op":"insert","table":"Availability_Zone","uuid-name":"z","row":{"name":"az3"}}`},
		{name: "a delete by prefix is bound to the AZ", db: ICSBDB, id: az2, op: `{"op":"delete","table":"Route","where":[["ip_prefix","==","10.1.0.0/16"]]}`, where: `["availability_zone","==",["uuid","u2"]]`},
		{name: "an unseen row is bound to the AZ", db: ICSBDB, id: az2, op: `{"op":"update","table":"Gateway","where":[["_uuid","==",["uuid","g9"]]],"row":{"hostname":"n"}}`, where: `["availability_zone","==",["uuid","u2"]]`},
		{name: "own pod published", db: ClusterSetDB, id: az2, op: `{"op":"insert","table":"Policy_Pod","row":{"cluster":"c2","namespace":"x","name":"a"}}`},
		{name: "own export updated", db: ClusterSetDB, id: az2, op: `{"op":"update","table":"Service_Export","where":[["_uuid","==",["uuid","e2"]]],"row":{"name":"y"}}`, where: `["cluster","==","c2"]`},
		{name: "a renaming AZ's old row", db: ICSBDB, id: Identity{Names: []string{"az1r", "az1"}}, op: `{"op":"update","table":"Availability_Zone","where":[["_uuid","==",["uuid","u1"]]],"row":{"name":"az1r"}}`, where: `["name","==","az1"]`},
		{name: "a renamed AZ's rows are bound to the name that has a row", db: ICSBDB, id: Identity{Names: []string{"az9", "az2"}}, op: `{"op":"mutate","table":"Port_Binding","where":[["logical_port","==","p"]],"mutations":[]}`, where: `["availability_zone","==",["uuid","u2"]]`},
		{name: "a transit switch's datapath", db: ICSBDB, id: az2, op: `{"op":"insert","table":"Datapath_Binding","row":{"transit_switch":"ts"}}`},
		{name: "a select", db: ICSBDB, id: az2, op: `{"op":"select","table":"Route","where":[]}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := Authorize(tc.db, tc.id, fakeView{}, []json.RawMessage{json.RawMessage(`{"op":"comment","comment":"x"}`), json.RawMessage(tc.op)})
			if tc.refused != "" {
				var r *Refusal
				if !errors.As(err, &r) || r.Op != 1 || !strings.Contains(err.Error(), tc.refused) {
					t.Fatalf("got %v (%s), want operation 1 refused with %q", err, out, tc.refused)
				}
				return
			}
			if err != nil {
				t.Fatalf("refused: %v", err)
			}
			if !strings.Contains(string(out[1]), tc.where) {
				t.Fatalf("operation %s, want it to hold %s", out[1], tc.where)
			}
		})
	}
}

// TestAuthorizeInTransaction: a route may refer to its AZ inserted in the same transaction,
// not to one another certificate made up in it.
func TestAuthorizeInTransaction(t *testing.T) {
	settle = 0
	ops := func(name string) []json.RawMessage {
		return []json.RawMessage{
			json.RawMessage(`{"op":"insert","table":"Availability_Zone","uuid-name":"z","row":{"name":"` + name + `"}}`),
			json.RawMessage(`{"op":"insert","table":"Route","row":{"availability_zone":["named-uuid","z"]}}`)}
	}
	if _, err := Authorize(ICSBDB, Identity{Names: []string{"az3"}}, fakeView{}, ops("az3")); err != nil {
		t.Errorf("az3 inserting itself and its route: %v", err)
	}
	// OVS's IDL orders operations by table: the route, then the AZ it refers to; a row
	// inserted in the transaction is then changed by its named uuid.
	reordered := append(ops("az3")[1:], ops("az3")[0],
		json.RawMessage(`{"op":"mutate","table":"Route","where":[["_uuid","==",["named-uuid","z"]]],"mutations":[]}`))
	if _, err := Authorize(ICSBDB, Identity{Names: []string{"az3"}}, fakeView{}, reordered); err != nil {
		t.Errorf("az3 inserting its route before itself: %v", err)
	}
	_, err := Authorize(ICSBDB, Identity{Names: []string{"az3"}}, fakeView{}, ops("az-rogue"))
	var r *Refusal
	if !errors.As(err, &r) || r.Op != 0 {
		t.Errorf("az3 making up az-rogue: %v, want operation 0 refused", err)
	}
}
