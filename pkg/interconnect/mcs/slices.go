package mcs

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"strings"

	"github.com/ovn-org/libovsdb/ovsdb"

	"github.com/kovn/kovn/pkg/ovn"
	"github.com/kovn/kovn/pkg/ovn/model/clusterset"
)

// SyncSlices makes the store hold exactly want as this cluster's endpoint slices of the
// exported Service namespace/service, in one transaction; slices that already match are left
// alone. It returns whether anything was written.
func (s *Store) SyncSlices(ctx context.Context, namespace, service string, want []Slice) (bool, error) {
	var list []*clusterset.EndpointSlice
	err := s.DB.WhereCache(func(e *clusterset.EndpointSlice) bool {
		return e.Cluster == s.Cluster && e.Namespace == namespace && e.Service == service
	}).List(ctx, &list)
	if err != nil {
		return false, err
	}
	have := map[string]*clusterset.EndpointSlice{}
	for _, e := range list {
		have[e.Name] = e
	}
	want = slices.Clone(want) // the caller's slice stays as it was
	for i := range want {
		want[i].Cluster, want[i].Namespace, want[i].Service = s.Cluster, namespace, service
	}
	ops, err := diffOps(s.DB, have, want, func(w Slice) string { return w.Name },
		func(w Slice, cur *clusterset.EndpointSlice) bool {
			have, _ := s.sliceOf(ctx, cur) // an incomplete view differs: the row is written again
			return reflect.DeepEqual(normalizeSlice(have), normalizeSlice(w))
		}, s.writeSlice)
	if err != nil {
		return false, err
	}
	if _, err := s.transact(ctx, ops); err != nil {
		return false, fmt.Errorf("clusterset endpoint slices of %s/%s from %s: %w", namespace, service, s.Cluster, err)
	}
	return len(ops) > 0, nil
}

// writeSlice inserts w (cur nil) or rewrites cur as w, ports and endpoints as new child rows.
func (s *Store) writeSlice(w Slice, cur *clusterset.EndpointSlice) ([]ovsdb.Operation, error) {
	ops, ports, err := s.insertPorts(w.Ports)
	if err != nil {
		return nil, err
	}
	var eps []string
	for _, e := range w.Endpoints {
		row := &clusterset.Endpoint{UUID: ovn.NewNamedUUID(), Addresses: e.Addresses, Ready: e.Ready, Serving: e.Serving,
			Terminating: e.Terminating, Hostname: e.Hostname, Zone: e.Zone, NodeName: e.NodeName}
		o, err := s.DB.Create(row)
		if err != nil {
			return nil, err
		}
		ops = append(ops, o...)
		eps = append(eps, row.UUID)
	}
	row := &clusterset.EndpointSlice{Cluster: w.Cluster, Namespace: w.Namespace, Service: w.Service, Name: w.Name,
		AddressType: w.AddressType, Ports: ports, Endpoints: eps}
	var o []ovsdb.Operation
	if cur == nil {
		row.UUID = ovn.NewNamedUUID()
		o, err = s.DB.Create(row)
	} else {
		row.UUID = cur.UUID
		o, err = s.DB.Where(row).Update(row, &row.Service, &row.AddressType, &row.Ports, &row.Endpoints)
	}
	return append(ops, o...), err
}

// Slices are every cluster's endpoint slices of the exported Service namespace/service,
// ordered by cluster and name.
func (s *Store) Slices(ctx context.Context, namespace, service string) ([]Slice, error) {
	var rows []*clusterset.EndpointSlice
	err := s.DB.WhereCache(func(e *clusterset.EndpointSlice) bool { return e.Namespace == namespace && e.Service == service }).List(ctx, &rows)
	if err != nil {
		return nil, err
	}
	var out []Slice
	for _, r := range rows {
		sl, complete := s.sliceOf(ctx, r)
		if !complete {
			return nil, ErrIncomplete
		}
		out = append(out, sl)
	}
	slices.SortFunc(out, func(a, b Slice) int {
		if c := strings.Compare(a.Cluster, b.Cluster); c != 0 {
			return c
		}
		return strings.Compare(a.Name, b.Name)
	})
	return out, nil
}

// sliceOf decodes a cached slice with its ports and endpoints; complete is false when one of
// them is not in the cache yet (see ErrIncomplete).
func (s *Store) sliceOf(ctx context.Context, r *clusterset.EndpointSlice) (Slice, bool) {
	ports, complete := s.ports(ctx, r.Ports)
	out := Slice{Cluster: r.Cluster, Namespace: r.Namespace, Service: r.Service, Name: r.Name, AddressType: r.AddressType,
		Ports: ports}
	for _, id := range r.Endpoints {
		e := &clusterset.Endpoint{UUID: id}
		if err := s.DB.Get(ctx, e); err != nil {
			complete = false
			continue
		}
		out.Endpoints = append(out.Endpoints, Endpoint{Addresses: e.Addresses, Ready: e.Ready, Serving: e.Serving,
			Terminating: e.Terminating, Hostname: e.Hostname, Zone: e.Zone, NodeName: e.NodeName})
	}
	sortEndpoints(out.Endpoints)
	return out, complete
}

func normalizeSlice(s Slice) Slice {
	s.Ports, s.Endpoints = slices.Clone(s.Ports), slices.Clone(s.Endpoints) // sorted without touching the caller's
	sortPorts(s.Ports)
	if len(s.Ports) == 0 {
		s.Ports = nil
	}
	sortEndpoints(s.Endpoints)
	if len(s.Endpoints) == 0 {
		s.Endpoints = nil
	}
	return s
}

func sortEndpoints(eps []Endpoint) {
	slices.SortFunc(eps, func(a, b Endpoint) int { return slices.Compare(a.Addresses, b.Addresses) })
}
