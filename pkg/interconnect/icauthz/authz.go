// Package icauthz is kovn's authorizing relay for the clusterset's IC-SB server (OVN 23.03's
// OVN_IC_Southbound and kovn's OVN_ClusterSet beside it). OVN-IC's databases have no access
// control: any AZ's certificate may change any AZ's rows, and every peer's ovn-ic installs a
// route the moment it appears under an AZ's name. The relay stands where the server listened:
// it takes the client's TLS certificate (CN = its AZ name, DNS SANs = further names it may
// act for, e.g. while it renames), passes every message through, and checks each transact
// against the rows' owners before the server sees it:
//
//   - Availability_Zone, and Gateway, Port_Binding and Route by their availability_zone: an
//     AZ inserts, changes and deletes only rows of its own names;
//   - Encap is inserted freely (it lives only while a Gateway or Port_Binding of its AZ refers
//     to it) and never changed or deleted directly (ovn-ic only inserts them);
//   - Datapath_Binding is the transit switches', shared by every AZ;
//   - IC_SB_Global, Connection and SSL are the server's: written on its host only;
//   - OVN_ClusterSet: a Cluster row by its availability_zone, Service_Export,
//     Endpoint_Slice, Policy_Namespace and Policy_Pod by their cluster (whose Cluster row must be the AZ's); their child rows
//     are inserted with them and never changed directly.
//
// A change of a row the relay knows to be another AZ's is refused with OVSDB's "permission
// error" (as OVN's own RBAC refuses); every update, mutate and delete also carries a condition
// on its owner, so a row the relay has not seen yet is still never another AZ's to change.
package icauthz

import (
	"encoding/json"
	"fmt"
	"slices"
	"time"
)

// Databases the relay authorizes; a write to any other database is refused.
const (
	ICSBDB       = "OVN_IC_Southbound"
	ClusterSetDB = "OVN_ClusterSet"
)

// Identity is who a connection is: the names (AZ names) its certificate may act for, its
// common name first.
type Identity struct{ Names []string }

func (id Identity) may(name string) bool { return name != "" && slices.Contains(id.Names, name) }
func (id Identity) primary() string {
	if len(id.Names) == 0 {
		return ""
	}
	return id.Names[0]
}

// View is what the relay knows of the rows' owners (its own monitor of the server).
type View interface {
	// AZName is the name of Availability_Zone row uuid.
	AZName(uuid string) (string, bool)
	// AZUUID is the uuid of the Availability_Zone named name.
	AZUUID(name string) (string, bool)
	// Owner is the owner column's value of row uuid of table in db: an AZ's uuid (Gateway,
	// Port_Binding, Route), an AZ's name (Availability_Zone, Cluster) or a cluster's name
	// (Service_Export, Endpoint_Slice).
	Owner(db, table, uuid string) (string, bool)
	// ClusterAZ is the availability zone cluster's Cluster row names.
	ClusterAZ(cluster string) (string, bool)
}

// Refusal is a transaction the relay did not pass on: Op is the index of the refused
// operation.
type Refusal struct {
	Op     int
	Reason string
}

func (r *Refusal) Error() string { return fmt.Sprintf("operation %d: %s", r.Op, r.Reason) }

// table says how a table's rows are owned.
type table struct {
	column string // the owner column
	kind   ownerKind
}

type ownerKind int

const (
	byAZUUID   ownerKind = iota // the column refers to an Availability_Zone row
	byAZName                    // the column holds an AZ's name
	byCluster                   // the column holds a cluster's name (its Cluster row's AZ owns it)
	insertOnly                  // inserted freely, never changed or deleted directly
	shared                      // any AZ
	serverOnly                  // none
)

var tables = map[string]map[string]table{
	ICSBDB: {
		"Availability_Zone": {"name", byAZName},
		"Gateway":           {"availability_zone", byAZUUID},
		"Port_Binding":      {"availability_zone", byAZUUID},
		"Route":             {"availability_zone", byAZUUID},
		"Encap":             {"", insertOnly},
		"Datapath_Binding":  {"", shared},
		"IC_SB_Global":      {"", serverOnly},
		"Connection":        {"", serverOnly},
		"SSL":               {"", serverOnly},
	},
	ClusterSetDB: {
		"Cluster":        {"availability_zone", byAZName},
		"Service_Export": {"cluster", byCluster},
		"Endpoint_Slice": {"cluster", byCluster},
		// A cluster's pods and namespaces for other clusters' policies: publishing a pod
		// under another cluster's name would put its address into their allowed peers.
		"Policy_Namespace": {"cluster", byCluster},
		"Policy_Pod":       {"cluster", byCluster},
		"Service_Port":     {"", insertOnly},
		"Endpoint":         {"", insertOnly},
	},
}

// operation is the part of an OVSDB operation the rules read; the rest passes as it came.
type operation struct {
	Op        string                     `json:"op"`
	Table     string                     `json:"table"`
	Row       map[string]json.RawMessage `json:"row"`
	Where     []json.RawMessage          `json:"where"`
	Mutations [][]json.RawMessage        `json:"mutations"`
	UUIDName  string                     `json:"uuid-name"`
}

// settle is how long an insert referring to a row the view has not seen (an AZ or Cluster
// row its writer inserted a moment ago) waits for the view.
var settle = 2 * time.Second

// Authorize checks a transact's operations (params after the database name) for id and
// returns them as the server is to see them: every update, mutate and delete of an owned
// table bound to its owner. It refuses the whole transaction if any operation is not id's
// to make.
func Authorize(db string, id Identity, v View, ops []json.RawMessage) ([]json.RawMessage, error) {
	t := &txn{db: db, id: id, v: v, azNamed: map[string]string{}, inserted: map[string]bool{}}
	parsed := make([]operation, len(ops))
	errs := make([]error, len(ops))
	for i, raw := range ops {
		errs[i] = json.Unmarshal(raw, &parsed[i])
	}
	t.scanInserts(parsed, errs)
	out := make([]json.RawMessage, len(ops))
	for i, raw := range ops {
		if errs[i] != nil {
			return nil, &Refusal{Op: i, Reason: fmt.Sprintf("unreadable operation: %v", errs[i])}
		}
		o, err := t.op(raw, parsed[i])
		if err != nil {
			return nil, &Refusal{Op: i, Reason: err.Error()}
		}
		out[i] = o
	}
	return out, nil
}

type txn struct {
	db       string
	id       Identity
	v        View
	azNamed  map[string]string // uuid-name of an Availability_Zone inserted in this transaction -> its name
	inserted map[string]bool   // uuid-names of the rows this transaction inserts
}

// scanInserts notes the rows the transaction inserts, before any operation is checked: OVS's
// IDL orders a transaction's operations by table, so a Gateway may come before the
// Availability_Zone it refers to. Each insert is still checked on its own.
func (t *txn) scanInserts(ops []operation, errs []error) {
	for i, o := range ops {
		if errs[i] != nil || o.Op != "insert" || o.UUIDName == "" {
			continue
		}
		t.inserted[o.UUIDName] = true
		var name string
		if t.db == ICSBDB && o.Table == "Availability_Zone" && json.Unmarshal(o.Row["name"], &name) == nil {
			t.azNamed[o.UUIDName] = name
		}
	}
}

// op checks one operation (raw, read as o) and returns it as the server is to see it.
func (t *txn) op(raw json.RawMessage, o operation) (json.RawMessage, error) {
	switch o.Op {
	case "insert", "update", "mutate", "delete":
	default:
		return raw, nil // select, wait, comment, assert, commit, abort: nothing written
	}
	rules, ok := tables[t.db]
	if !ok {
		return nil, fmt.Errorf("database %s is not written through this relay", t.db)
	}
	tb, ok := rules[o.Table]
	if !ok {
		return nil, fmt.Errorf("table %s is not written through this relay", o.Table)
	}
	switch tb.kind {
	case shared:
		return raw, nil
	case serverOnly:
		return nil, fmt.Errorf("%s is written on the database's host only", o.Table)
	case insertOnly:
		if o.Op == "insert" {
			return raw, nil
		}
		return nil, fmt.Errorf("%s rows are inserted with the row that refers to them, never %sd directly", o.Table, o.Op)
	}
	if o.Op == "insert" {
		return raw, t.checkRowOwner(o, tb, true)
	}
	return t.bind(raw, o, tb)
}

// checkRowOwner checks the owner column an insert must set (and an update may) names one of
// id's AZs, and remembers an Availability_Zone inserted by name for rows referring to it.
func (t *txn) checkRowOwner(o operation, tb table, insert bool) error {
	val, ok := o.Row[tb.column]
	if !ok {
		if insert {
			return fmt.Errorf("a %s row without %s", o.Table, tb.column)
		}
		return nil
	}
	switch tb.kind {
	case byAZName:
		var name string
		if err := json.Unmarshal(val, &name); err != nil {
			return fmt.Errorf("%s.%s: %v", o.Table, tb.column, err)
		}
		if !t.id.may(name) {
			return fmt.Errorf("%s for AZ %q: this certificate acts for %v only", o.Table, name, t.id.Names)
		}
	case byAZUUID:
		var ref []string
		if err := json.Unmarshal(val, &ref); err != nil || len(ref) != 2 {
			return fmt.Errorf("%s.%s is not one reference: %s", o.Table, tb.column, val)
		}
		name, ok := t.azNamed[ref[1]] // checked as the insert it is
		if ref[0] == "uuid" {
			name, ok = waitFor(func() (string, bool) { return t.v.AZName(ref[1]) })
		}
		if !ok {
			return fmt.Errorf("%s refers to an unknown Availability_Zone %s", o.Table, ref[1])
		}
		if !t.id.may(name) {
			return fmt.Errorf("%s of AZ %q: this certificate acts for %v only", o.Table, name, t.id.Names)
		}
	case byCluster:
		var cluster string
		if err := json.Unmarshal(val, &cluster); err != nil {
			return fmt.Errorf("%s.%s: %v", o.Table, tb.column, err)
		}
		az, ok := waitFor(func() (string, bool) { return t.v.ClusterAZ(cluster) })
		if !ok {
			return fmt.Errorf("%s of cluster %q, which has no Cluster row", o.Table, cluster)
		}
		if !t.id.may(az) {
			return fmt.Errorf("%s of cluster %q (AZ %q): this certificate acts for %v only", o.Table, cluster, az, t.id.Names)
		}
	}
	return nil
}

// bind checks an update, mutate or delete of an owned table and adds a condition on its
// owner: the row's own (known to the view), else id's common name's.
func (t *txn) bind(raw json.RawMessage, o operation, tb table) (json.RawMessage, error) {
	if o.Op == "update" {
		if err := t.checkRowOwner(o, tb, false); err != nil {
			return nil, err
		}
	}
	for _, m := range o.Mutations {
		var col string
		if len(m) > 0 && json.Unmarshal(m[0], &col) == nil && col == tb.column {
			return nil, fmt.Errorf("%s.%s is not mutated through this relay", o.Table, tb.column)
		}
	}
	kind, ref := whereUUID(o.Where)
	if kind == "named-uuid" && t.inserted[ref] {
		return raw, nil // a row this transaction inserts (and checked as such)
	}
	owner, err := t.owner(o, tb, kind, ref)
	if err != nil {
		return nil, err
	}
	value := any(owner)
	if tb.kind == byAZUUID {
		value = []string{"uuid", owner}
	}
	where := append(slices.Clone(o.Where), mustJSON([]any{tb.column, "==", value}))
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil {
		return nil, err
	}
	fields["where"] = mustJSON(where)
	return json.Marshal(fields)
}

// owner is the owner value o's condition binds to.
func (t *txn) owner(o operation, tb table, kind, uuid string) (string, error) {
	if kind == "uuid" {
		if owner, ok := t.v.Owner(t.db, o.Table, uuid); ok {
			name, known := owner, true
			switch tb.kind {
			case byAZUUID:
				name, known = t.v.AZName(owner)
			case byCluster:
				name, known = t.v.ClusterAZ(owner)
			}
			if !known || !t.id.may(name) {
				return "", fmt.Errorf("%s row %s is AZ %q's: this certificate acts for %v only", o.Table, uuid, name, t.id.Names)
			}
			return owner, nil
		}
	}
	p := t.id.primary()
	switch tb.kind {
	case byAZUUID:
		// The first of its names that has an AZ row (a renamed AZ's row carries its new name).
		for _, n := range t.id.Names {
			if uuid, ok := t.v.AZUUID(n); ok {
				return uuid, nil
			}
		}
		return "", fmt.Errorf("%s %s of AZ %q, which has no Availability_Zone row", o.Table, o.Op, p)
	case byCluster:
		return "", fmt.Errorf("%s %s naming no row of AZ %v by _uuid: a cluster's rows are changed by _uuid only", o.Table, o.Op, t.id.Names)
	}
	return p, nil
}

// whereUUID is the row a condition list names by ["_uuid", "==", [KIND, X]]: KIND "uuid", or
// "named-uuid" for a row inserted in the same transaction; "" when it names none.
func whereUUID(where []json.RawMessage) (kind, id string) {
	for _, c := range where {
		var cond []json.RawMessage
		var col, fn string
		var ref []string
		if json.Unmarshal(c, &cond) != nil || len(cond) != 3 || json.Unmarshal(cond[0], &col) != nil ||
			json.Unmarshal(cond[1], &fn) != nil || col != "_uuid" || fn != "==" ||
			json.Unmarshal(cond[2], &ref) != nil || len(ref) != 2 {
			continue
		}
		return ref[0], ref[1]
	}
	return "", ""
}

// waitFor asks the view until it knows, for up to settle: a row its writer inserted a moment
// ago reaches the relay's monitor about when the writer's reply reaches the writer.
func waitFor(get func() (string, bool)) (string, bool) {
	deadline := time.Now().Add(settle)
	for {
		if v, ok := get(); ok || time.Now().After(deadline) {
			return v, ok
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}
