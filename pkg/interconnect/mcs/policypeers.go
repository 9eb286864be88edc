package mcs

import (
	"context"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"

	"github.com/ovn-org/libovsdb/ovsdb"

	"github.com/kovn/kovn/pkg/ovn"
	"github.com/kovn/kovn/pkg/ovn/model/clusterset"
)

// PolicyNamespace is a namespace a cluster publishes for the other clusters' policies.
type PolicyNamespace struct {
	Name   string
	Labels map[string]string
}

// PolicyPod is a published pod: its labels and the addresses kovn gave it.
type PolicyPod struct {
	Namespace, Name string
	Labels          map[string]string
	Addresses       []string
}

// SyncPolicyNamespace makes the store hold exactly ns (nil: not published) and its pods as
// this cluster's rows of namespace name, in one transaction; rows that already match are left
// alone. It returns whether anything was written.
func (s *Store) SyncPolicyNamespace(ctx context.Context, name string, ns *PolicyNamespace, pods []PolicyPod) (bool, error) {
	var nsRows []*clusterset.PolicyNamespace
	if err := s.DB.WhereCache(func(r *clusterset.PolicyNamespace) bool { return r.Cluster == s.Cluster && r.Name == name }).List(ctx, &nsRows); err != nil {
		return false, err
	}
	haveNS := map[string]*clusterset.PolicyNamespace{}
	for _, r := range nsRows {
		haveNS[r.Name] = r
	}
	var podRows []*clusterset.PolicyPod
	if err := s.DB.WhereCache(func(r *clusterset.PolicyPod) bool { return r.Cluster == s.Cluster && r.Namespace == name }).List(ctx, &podRows); err != nil {
		return false, err
	}
	havePods := map[string]*clusterset.PolicyPod{}
	for _, r := range podRows {
		havePods[r.Name] = r
	}
	var wantNS []PolicyNamespace
	if ns != nil {
		wantNS = []PolicyNamespace{*ns}
	} else {
		pods = nil // an unpublished namespace has no published pods
	}
	ops, err := diffOps(s.DB, haveNS, wantNS, func(w PolicyNamespace) string { return w.Name },
		func(w PolicyNamespace, cur *clusterset.PolicyNamespace) bool { return equalMaps(w.Labels, cur.Labels) },
		s.writePolicyNamespace)
	if err != nil {
		return false, err
	}
	podOps, err := diffOps(s.DB, havePods, pods, func(w PolicyPod) string { return w.Name },
		func(w PolicyPod, cur *clusterset.PolicyPod) bool {
			return equalMaps(w.Labels, cur.Labels) && slices.Equal(sortedAddresses(w.Addresses), sortedAddresses(cur.Addresses))
		}, s.writePolicyPod)
	if err != nil {
		return false, err
	}
	ops = append(ops, podOps...)
	if len(ops) == 0 {
		return false, nil
	}
	if _, err := s.transact(ctx, ops); err != nil {
		return false, fmt.Errorf("clusterset policy peers of %s/%s: %w", s.Cluster, name, err)
	}
	return true, nil
}

func (s *Store) writePolicyNamespace(w PolicyNamespace, cur *clusterset.PolicyNamespace) ([]ovsdb.Operation, error) {
	row := &clusterset.PolicyNamespace{Cluster: s.Cluster, Name: w.Name, Labels: w.Labels}
	if cur == nil {
		row.UUID = ovn.NewNamedUUID()
		return s.DB.Create(row)
	}
	row.UUID = cur.UUID
	return s.DB.Where(row).Update(row, &row.Labels)
}

func (s *Store) writePolicyPod(w PolicyPod, cur *clusterset.PolicyPod) ([]ovsdb.Operation, error) {
	row := &clusterset.PolicyPod{Cluster: s.Cluster, Namespace: w.Namespace, Name: w.Name, Labels: w.Labels,
		Addresses: sortedAddresses(w.Addresses)}
	if cur == nil {
		row.UUID = ovn.NewNamedUUID()
		return s.DB.Create(row)
	}
	row.UUID = cur.UUID
	return s.DB.Where(row).Update(row, &row.Labels, &row.Addresses)
}

// PublishedNamespaces are the names of the namespaces this cluster has rows of.
func (s *Store) PublishedNamespaces(ctx context.Context) (map[string]bool, error) {
	var nss []*clusterset.PolicyNamespace
	if err := s.DB.WhereCache(func(r *clusterset.PolicyNamespace) bool { return r.Cluster == s.Cluster }).List(ctx, &nss); err != nil {
		return nil, err
	}
	var pods []*clusterset.PolicyPod
	if err := s.DB.WhereCache(func(r *clusterset.PolicyPod) bool { return r.Cluster == s.Cluster }).List(ctx, &pods); err != nil {
		return nil, err
	}
	out := map[string]bool{}
	for _, r := range nss {
		out[r.Name] = true
	}
	for _, r := range pods {
		out[r.Namespace] = true
	}
	return out, nil
}

func equalMaps(a, b map[string]string) bool {
	return len(a) == len(b) && (len(a) == 0 || maps.Equal(a, b))
}

// sortedAddresses is addrs in a canonical order (the store holds a set).
func sortedAddresses(addrs []string) []string {
	out := slices.Clone(addrs)
	slices.SortFunc(out, func(a, b string) int {
		pa, ea := netip.ParseAddr(a)
		pb, eb := netip.ParseAddr(b)
		if ea != nil || eb != nil {
			return strings.Compare(a, b)
		}
		return pa.Compare(pb)
	})
	return slices.Compact(out)
}
