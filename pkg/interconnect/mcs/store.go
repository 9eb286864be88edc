// Package mcs implements the Multi-Cluster Services API (KEP-1645) on kovn: ServiceExports are
// written to the clusterset store, an OVSDB database (OVN_ClusterSet, schema in
// deploy/ovsdb) served beside OVN-IC's southbound database, and every cluster of the set
// imports them from there. No broker or hub cluster runs.
package mcs

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"time"

	libovsdb "github.com/ovn-org/libovsdb/client"
	"github.com/ovn-org/libovsdb/model"
	"github.com/ovn-org/libovsdb/ovsdb"

	"github.com/kovn/kovn/pkg/ovn"
	"github.com/kovn/kovn/pkg/ovn/model/clusterset"
)

// Export is one cluster's export of a Service, as the clusterset store holds it.
type Export struct {
	Cluster, Namespace, Name string
	Type                     string // ClusterSetIP or Headless
	Ports                    []Port
	SessionAffinity          string // None or ClientIP
	AffinityTimeout          *int   // seconds, with ClientIP
	InternalTrafficPolicy    *string
	TrafficDistribution      *string
	IPFamilies               []string // IPv4, IPv6, in the Service's order
	Labels, Annotations      map[string]string
	// ExportedAt is the ServiceExport's creation time: in a conflict, the oldest export wins.
	ExportedAt time.Time
	// Locality is where importing clusters send the traffic (LocalityLocalFirst,
	// LocalityRemoteOnly; "" is global, every exporting cluster alike).
	Locality string
}

// localityKey holds Export.Locality in a Service_Export row's external_ids (absent: global,
// so rows of a kovn without locality read the same).
const localityKey = "locality"

// Port is a Service port (on an export) or an endpoint port (on a slice: the target port).
type Port struct {
	Name, Protocol string
	Port           int
	AppProtocol    *string
}

// Slice is one EndpointSlice of an exported Service in the cluster that exports it.
type Slice struct {
	Cluster, Namespace, Service, Name string
	AddressType                       string // IPv4 or IPv6
	Ports                             []Port
	Endpoints                         []Endpoint
}

// Endpoint is one endpoint of a Slice.
type Endpoint struct {
	Addresses                   []string
	Ready, Serving, Terminating bool
	Hostname, Zone, NodeName    *string
}

// Store reads every cluster's rows of the clusterset database and writes this cluster's own.
// The client must monitor every table (ovn.ConnectClusterSet): reads come from its cache.
type Store struct {
	DB      libovsdb.Client
	Cluster string // this cluster's id: the rows it writes carry it, and it writes no other
}

// SyncExports makes the store hold exactly want as this cluster's exports of namespace/name
// pairs in scope (nil scope: all of this cluster's exports), in one transaction; rows that
// already match are left alone. It returns whether anything was written.
func (s *Store) SyncExports(ctx context.Context, want []Export, scope func(namespace, name string) bool) (bool, error) {
	have, err := s.rows(ctx, func(e *clusterset.ServiceExport) bool {
		return e.Cluster == s.Cluster && (scope == nil || scope(e.Namespace, e.Name))
	})
	if err != nil {
		return false, err
	}
	want = slices.Clone(want) // the caller's slice stays as it was
	for i := range want {
		want[i].Cluster = s.Cluster
	}
	ops, err := diffOps(s.DB, have, want, func(w Export) string { return w.Namespace + "/" + w.Name },
		func(w Export, cur *clusterset.ServiceExport) bool {
			have, _ := s.exportOf(ctx, cur) // an incomplete view differs: the row is written again
			return reflect.DeepEqual(normalizeExport(have), normalizeExport(w))
		}, s.writeExport)
	if err != nil {
		return false, err
	}
	if _, err := s.transact(ctx, ops); err != nil {
		return false, fmt.Errorf("clusterset exports of %s: %w", s.Cluster, err)
	}
	return len(ops) > 0, nil
}

// diffOps are the operations that make the rows have (this cluster's, by key) hold exactly
// want: a wanted row that is missing or not the same is written, an unwanted one deleted.
func diffOps[W any, R model.Model](db libovsdb.Client, have map[string]R, want []W, key func(W) string,
	same func(W, R) bool, write func(W, R) ([]ovsdb.Operation, error)) ([]ovsdb.Operation, error) {
	var ops []ovsdb.Operation
	for _, w := range want {
		cur, ok := have[key(w)]
		delete(have, key(w))
		if ok && same(w, cur) {
			continue
		}
		o, err := write(w, cur)
		if err != nil {
			return nil, err
		}
		ops = append(ops, o...)
	}
	for _, stale := range have {
		o, err := db.Where(stale).Delete()
		if err != nil {
			return nil, err
		}
		ops = append(ops, o...)
	}
	return ops, nil
}

// rows lists the cached exports matching pred, by namespace/name.
func (s *Store) rows(ctx context.Context, pred func(*clusterset.ServiceExport) bool) (map[string]*clusterset.ServiceExport, error) {
	var list []*clusterset.ServiceExport
	if err := s.DB.WhereCache(pred).List(ctx, &list); err != nil {
		return nil, err
	}
	out := map[string]*clusterset.ServiceExport{}
	for _, e := range list {
		out[e.Namespace+"/"+e.Name] = e
	}
	return out, nil
}

// writeExport inserts w (cur nil) or rewrites cur as w, ports as new child rows (the old ones
// go with their last reference).
func (s *Store) writeExport(w Export, cur *clusterset.ServiceExport) ([]ovsdb.Operation, error) {
	ops, ports, err := s.insertPorts(w.Ports)
	if err != nil {
		return nil, err
	}
	row := &clusterset.ServiceExport{Cluster: w.Cluster, Namespace: w.Namespace, Name: w.Name, Type: w.Type, Ports: ports,
		SessionAffinity: w.SessionAffinity, AffinityTimeout: w.AffinityTimeout, InternalTrafficPolicy: w.InternalTrafficPolicy,
		TrafficDistribution: w.TrafficDistribution, IPFamilies: w.IPFamilies, Labels: w.Labels, Annotations: w.Annotations,
		ExportedAt: int(w.ExportedAt.UnixMilli()), ExternalIDs: map[string]string{}}
	if w.Locality != "" {
		row.ExternalIDs[localityKey] = w.Locality
	}
	if row.SessionAffinity == "" {
		row.SessionAffinity = "None"
	}
	var o []ovsdb.Operation
	if cur == nil {
		row.UUID = ovn.NewNamedUUID()
		o, err = s.DB.Create(row)
	} else {
		row.UUID = cur.UUID
		o, err = s.DB.Where(row).Update(row, &row.Type, &row.Ports, &row.SessionAffinity, &row.AffinityTimeout,
			&row.InternalTrafficPolicy, &row.TrafficDistribution, &row.IPFamilies, &row.Labels, &row.Annotations, &row.ExportedAt, &row.ExternalIDs)
	}
	return append(ops, o...), err
}

func (s *Store) insertPorts(ports []Port) ([]ovsdb.Operation, []string, error) {
	var ops []ovsdb.Operation
	var uuids []string
	for _, p := range ports {
		row := &clusterset.ServicePort{UUID: ovn.NewNamedUUID(), Name: p.Name, Protocol: p.Protocol, Port: p.Port, AppProtocol: p.AppProtocol}
		o, err := s.DB.Create(row)
		if err != nil {
			return nil, nil, err
		}
		ops = append(ops, o...)
		uuids = append(uuids, row.UUID)
	}
	return ops, uuids, nil
}

// Exports are every cluster's exports of namespace/name, oldest first (ties by cluster).
func (s *Store) Exports(ctx context.Context, namespace, name string) ([]Export, error) {
	have, err := s.list(ctx, func(e *clusterset.ServiceExport) bool { return e.Namespace == namespace && e.Name == name })
	if err != nil {
		return nil, err
	}
	slices.SortFunc(have, func(a, b Export) int {
		if c := a.ExportedAt.Compare(b.ExportedAt); c != 0 {
			return c
		}
		return strings.Compare(a.Cluster, b.Cluster)
	})
	return have, nil
}

// AllExports are every cluster's exports.
func (s *Store) AllExports(ctx context.Context) ([]Export, error) {
	return s.list(ctx, func(*clusterset.ServiceExport) bool { return true })
}

func (s *Store) list(ctx context.Context, pred func(*clusterset.ServiceExport) bool) ([]Export, error) {
	var rows []*clusterset.ServiceExport
	if err := s.DB.WhereCache(pred).List(ctx, &rows); err != nil {
		return nil, err
	}
	var out []Export
	for _, r := range rows {
		e, complete := s.exportOf(ctx, r)
		if !complete {
			return nil, ErrIncomplete
		}
		out = append(out, e)
	}
	return out, nil
}

// ErrIncomplete: the cache holds a row that refers to a row it does not hold yet. libovsdb
// applies one update table by table (and fills a new cache so after a reconnection), so a
// reader can see an export before its ports; an import built from that view would drop the
// ports for a moment. Readers that build imports retry instead.
var ErrIncomplete = errors.New("clusterset store: the cache holds a row whose referenced rows have not arrived yet")

// exportOf decodes a cached row and its ports; complete is false when a port is missing.
func (s *Store) exportOf(ctx context.Context, r *clusterset.ServiceExport) (Export, bool) {
	ports, complete := s.ports(ctx, r.Ports)
	return Export{Cluster: r.Cluster, Namespace: r.Namespace, Name: r.Name, Type: r.Type, Ports: ports,
		SessionAffinity: r.SessionAffinity, AffinityTimeout: r.AffinityTimeout, InternalTrafficPolicy: r.InternalTrafficPolicy,
		TrafficDistribution: r.TrafficDistribution, IPFamilies: r.IPFamilies, Labels: r.Labels, Annotations: r.Annotations,
		ExportedAt: time.UnixMilli(int64(r.ExportedAt)), Locality: r.ExternalIDs[localityKey]}, complete
}

func (s *Store) ports(ctx context.Context, uuids []string) ([]Port, bool) {
	var out []Port
	complete := true
	for _, id := range uuids {
		p := &clusterset.ServicePort{UUID: id}
		if err := s.DB.Get(ctx, p); err != nil {
			complete = false // not in the cache yet: the rest of the update brings it
			continue
		}
		out = append(out, Port{Name: p.Name, Protocol: p.Protocol, Port: p.Port, AppProtocol: p.AppProtocol})
	}
	sortPorts(out)
	return out, complete
}

// storeWriteTimeout bounds a write to the store: libovsdb holds a transaction while it
// reconnects, and a reconcile blocked on a store that stays away would hold its worker, and
// keep the cluster from leaving the set, for as long.
const storeWriteTimeout = 10 * time.Second

// transact commits ops, giving up after storeWriteTimeout. Every write of the store goes
// through it; reads come from the cache and do not wait.
func (s *Store) transact(ctx context.Context, ops []ovsdb.Operation) ([]ovsdb.OperationResult, error) {
	ctx, cancel := context.WithTimeout(ctx, storeWriteTimeout)
	defer cancel()
	return ovn.Transact(ctx, s.DB, ops)
}

// ForgetCluster deletes every row of cluster (it left the set): exports, slices, published
// pods and namespaces and its
// Cluster row, in one transaction. Child rows go with them.
func (s *Store) ForgetCluster(ctx context.Context, cluster string) error {
	var ops []ovsdb.Operation
	for _, pred := range []any{
		func(e *clusterset.ServiceExport) bool { return e.Cluster == cluster },
		func(e *clusterset.EndpointSlice) bool { return e.Cluster == cluster },
		func(e *clusterset.PolicyPod) bool { return e.Cluster == cluster },
		func(e *clusterset.PolicyNamespace) bool { return e.Cluster == cluster },
		func(e *clusterset.Cluster) bool { return e.Name == cluster },
	} {
		o, err := s.DB.WhereCache(pred).Delete()
		if err != nil {
			return err
		}
		ops = append(ops, o...)
	}
	_, err := s.transact(ctx, ops)
	return err
}

// RegisterCluster records this cluster and its availability zone. It returns whether the row
// was missing: a store that lost it (a new database) lost this cluster's exports too. A
// cluster removes its own rows when it leaves (ForgetCluster); the rows of a cluster that
// vanished without leaving stay until it comes back or an operator forgets it.
func (s *Store) RegisterCluster(ctx context.Context, az string) (bool, error) {
	row := &clusterset.Cluster{Name: s.Cluster}
	if err := s.DB.Get(ctx, row); err == nil {
		if row.AvailabilityZone == az {
			return false, nil
		}
		row.AvailabilityZone = az
		ops, err := s.DB.Where(row).Update(row, &row.AvailabilityZone)
		if err == nil {
			_, err = s.transact(ctx, ops)
		}
		return false, err
	}
	ops, err := s.DB.Create(&clusterset.Cluster{UUID: ovn.NewNamedUUID(), Name: s.Cluster, AvailabilityZone: az})
	if err == nil {
		_, err = s.transact(ctx, ops)
	}
	return true, err
}

// Registered says whether this cluster's own row is in the cache. libovsdb empties its cache
// when it reconnects and refills it from the new monitor: until the row is back, the cache
// is not a view of the store (an empty one would read as "nothing exported anywhere").
func (s *Store) Registered(ctx context.Context) bool {
	return s.DB.Get(ctx, &clusterset.Cluster{Name: s.Cluster}) == nil
}

// Clusters are the registered clusters and their availability zones.
func (s *Store) Clusters(ctx context.Context) (map[string]string, error) {
	var rows []clusterset.Cluster
	if err := s.DB.List(ctx, &rows); err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, r := range rows {
		out[r.Name] = r.AvailabilityZone
	}
	return out, nil
}

// normalizeExport makes equal exports compare equal: empty and nil collections alike, ports
// sorted, the default affinity spelled out, time at the store's millisecond precision.
func normalizeExport(e Export) Export {
	e.Ports = slices.Clone(e.Ports) // sorted without touching the caller's
	sortPorts(e.Ports)
	if len(e.Ports) == 0 {
		e.Ports = nil
	}
	if len(e.IPFamilies) == 0 {
		e.IPFamilies = nil
	}
	if len(e.Labels) == 0 {
		e.Labels = nil
	}
	if len(e.Annotations) == 0 {
		e.Annotations = nil
	}
	if e.SessionAffinity == "" {
		e.SessionAffinity = "None"
	}
	e.ExportedAt = time.UnixMilli(e.ExportedAt.UnixMilli())
	return e
}

func sortPorts(ps []Port) {
	slices.SortFunc(ps, func(a, b Port) int {
		if c := strings.Compare(a.Name, b.Name); c != 0 {
			return c
		}
		if c := strings.Compare(a.Protocol, b.Protocol); c != 0 {
			return c
		}
		return a.Port - b.Port
	})
}
