// Package ipam hands out pod addresses and MACs inside kovn subnets. It is pure bookkeeping —
// no Kubernetes client, no OVN — so every rule can be unit-tested. The controller feeds it the
// Subnets and IPPools it watches, asks it for addresses when pods appear, and after a restart
// rebuilds it with Restore from the addresses pods already carry, before allocating anything new.
package ipam

import (
	"errors"
	"fmt"
	"net/netip"
	"sync"
)

// Sentinel errors. Every error returned wraps exactly one of them with context, so callers pick
// the reaction with errors.Is and show the message to the user.
var (
	// ErrInvalid: malformed input (bad MAC, two IPs of one family, non-canonical CIDR, ...).
	ErrInvalid = errors.New("invalid")
	// ErrNoSubnet: the subnet is not registered (yet).
	ErrNoSubnet = errors.New("no such subnet")
	// ErrNoPool: the request names a pool the subnet does not have (yet).
	ErrNoPool = errors.New("no such IP pool")
	// ErrOutOfRange: a requested address may not be handed out here: outside the subnet, the
	// network or broadcast address, excluded, or reserved for a different pool.
	ErrOutOfRange = errors.New("address not allocatable")
	// ErrConflict: the address or MAC is already held by another owner or by the gateway.
	ErrConflict = errors.New("conflict")
	// ErrExhausted: no free address left (in the subnet, or in the requested pool).
	ErrExhausted = errors.New("no free address")
	// ErrOwnerMismatch: the owner already holds an allocation that does not fit the request;
	// the caller releases it and asks again.
	ErrOwnerMismatch = errors.New("owner holds a different allocation")
	// ErrInUse: a subnet or pool still has allocations and cannot be deleted.
	ErrInUse = errors.New("in use")
)

func errorf(sentinel error, format string, args ...any) error {
	return fmt.Errorf(format+": %w", append(args, sentinel)...)
}

// IPAM is the allocator. One mutex guards everything: each operation is short (a few map
// look-ups and binary searches), and a single lock makes multi-family allocations atomic.
type IPAM struct {
	mu      sync.Mutex
	subnets map[string]*subnet
	owners  map[string]*record
}

// record is what one owner holds.
type record struct {
	subnet string
	pool   string
	ips    []netip.Addr // IPv4 first, then IPv6
	mac    string
}

func (r *record) allocation() Allocation {
	return Allocation{Subnet: r.subnet, Pool: r.pool, IPs: append([]netip.Addr(nil), r.ips...), MAC: r.mac}
}

type subnet struct {
	fams  [2]*family // [0] IPv4, [1] IPv6; nil when the subnet has no CIDR of that family
	pools map[string]*pool
	byIP  map[netip.Addr]string // address -> owner, including addresses no longer in the CIDRs
	macs  map[string]string     // MAC -> owner; MACs must be unique per logical switch only
	used  [2]int64
}

// family is one CIDR of a subnet with the sets derived from it.
type family struct {
	prefix   netip.Prefix
	gateway  netip.Addr // zero when none was given
	excluded rangeSet   // exclude ranges clipped to prefix
	usable   rangeSet   // prefix minus network, broadcast, gateway, excluded
	free     rangeSet   // usable minus pool ranges minus held addresses: dynamic space
	cursor   netip.Addr // last dynamically allocated address
}

// pool is a named sub-range of a subnet whose addresses only go to requests naming it.
type pool struct {
	ranges [2]rangeSet // as configured
	usable [2]rangeSet // ranges ∩ family.usable
	free   [2]rangeSet // usable minus held addresses
	cursor [2]netip.Addr
	used   [2]int64 // held addresses inside usable
}

func famIndex(a netip.Addr) int {
	if a.Is4() {
		return 0
	}
	return 1
}

func famName(i int) string {
	if i == 0 {
		return "IPv4"
	}
	return "IPv6"
}

// New returns an empty IPAM.
func New() *IPAM {
	return &IPAM{subnets: map[string]*subnet{}, owners: map[string]*record{}}
}

// broadcast is the IPv4 broadcast address, or the zero Addr for IPv6 (which has none).
func (f *family) broadcast() netip.Addr {
	if !f.prefix.Addr().Is4() {
		return netip.Addr{}
	}
	return prefixRange(f.prefix).Last
}

// AddOrUpdateSubnet registers a subnet or replaces its configuration. cidrs holds one or two
// prefixes of different families; gateways (at most one per CIDR) and exclude ranges are never
// handed out. Exclude ranges are clipped to the CIDRs. Existing allocations are kept even when
// they no longer fit (see Misplaced): dropping them would hand a running pod's address to
// another pod. A new gateway already held by a pod is refused with ErrConflict, since the
// router port and the pod would then answer for the same address; the subnet is left unchanged.
func (m *IPAM) AddOrUpdateSubnet(name string, cidrs []netip.Prefix, gateways []netip.Addr, exclude []Range) error {
	if name == "" {
		return errorf(ErrInvalid, "subnet name is empty")
	}
	fams, err := buildFamilies(cidrs, gateways, exclude)
	if err != nil {
		return fmt.Errorf("subnet %s: %w", name, err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	s := m.subnets[name]
	if s == nil {
		s = &subnet{pools: map[string]*pool{}, byIP: map[netip.Addr]string{}, macs: map[string]string{}}
		m.subnets[name] = s
	}
	for i, f := range fams {
		if f == nil {
			continue
		}
		if owner, held := s.byIP[f.gateway]; f.gateway.IsValid() && held {
			return errorf(ErrConflict, "subnet %s: gateway %s is held by %s", name, f.gateway, owner)
		}
		if old := s.fams[i]; old != nil {
			f.cursor = old.cursor // keep round-robin order across updates
		}
	}
	s.fams = fams
	s.rebuild()
	return nil
}

// buildFamilies validates a subnet's configuration and derives the per-family sets.
func buildFamilies(cidrs []netip.Prefix, gateways []netip.Addr, exclude []Range) ([2]*family, error) {
	var fams [2]*family
	if len(cidrs) == 0 || len(cidrs) > 2 {
		return fams, errorf(ErrInvalid, "need one or two CIDRs, got %d", len(cidrs))
	}
	for _, p := range cidrs {
		if !p.IsValid() || p.Addr().Zone() != "" || p.Addr().Is4In6() {
			return fams, errorf(ErrInvalid, "CIDR %s is not usable", p)
		}
		if p != p.Masked() {
			return fams, errorf(ErrInvalid, "CIDR %s has host bits set (did you mean %s?)", p, p.Masked())
		}
		i := famIndex(p.Addr())
		if fams[i] != nil {
			return fams, errorf(ErrInvalid, "two %s CIDRs (%s, %s)", famName(i), fams[i].prefix, p)
		}
		fams[i] = &family{prefix: p}
	}
	for _, g := range gateways {
		f := (*family)(nil)
		if g.IsValid() {
			f = fams[famIndex(g)]
		}
		switch {
		case f == nil || !f.prefix.Contains(g):
			return fams, errorf(ErrInvalid, "gateway %s is outside the CIDRs", g)
		case f.gateway.IsValid():
			return fams, errorf(ErrInvalid, "two gateways in %s (%s, %s)", f.prefix, f.gateway, g)
		case g == f.prefix.Addr() || g == f.broadcast():
			return fams, errorf(ErrInvalid, "gateway %s is the network or broadcast address of %s", g, f.prefix)
		}
		f.gateway = g
	}
	var ex [2][]Range
	for _, r := range exclude {
		if !r.First.IsValid() || r.First.BitLen() != r.Last.BitLen() || r.First.Compare(r.Last) > 0 {
			return fams, errorf(ErrInvalid, "exclude range %s is malformed", r)
		}
		ex[famIndex(r.First)] = append(ex[famIndex(r.First)], r)
	}
	for i, f := range fams {
		if f == nil {
			continue
		}
		whole := rangeSet{prefixRange(f.prefix)}
		f.excluded = intersect(normalize(ex[i]), whole)
		reserved := append(rangeSet{{First: f.prefix.Addr(), Last: f.prefix.Addr()}}, f.excluded...)
		for _, a := range []netip.Addr{f.broadcast(), f.gateway} {
			if a.IsValid() {
				reserved = append(reserved, Range{First: a, Last: a})
			}
		}
		f.usable = subtract(whole, normalize(reserved))
	}
	return fams, nil
}

// rebuild recomputes every free set from the configuration and the held addresses. It runs on
// configuration changes only; allocations adjust the sets incrementally.
func (s *subnet) rebuild() {
	var held [2][]netip.Addr
	for a := range s.byIP {
		held[famIndex(a)] = append(held[famIndex(a)], a)
	}
	for i, f := range s.fams {
		heldSet := addrSet(held[i])
		var pooled []Range
		for _, p := range s.pools {
			if f == nil {
				p.usable[i], p.free[i], p.used[i] = nil, nil, 0
				continue
			}
			p.usable[i] = intersect(p.ranges[i], f.usable)
			p.free[i] = subtract(p.usable[i], heldSet)
			p.used[i] = toInt64(intersect(p.usable[i], heldSet).size())
			pooled = append(pooled, p.ranges[i]...)
		}
		if f != nil {
			f.free = subtract(subtract(f.usable, normalize(pooled)), heldSet)
		}
	}
}

// DeleteSubnet forgets a subnet and its pools. It fails with ErrInUse while any owner holds an
// address in it, so a pod's address cannot be handed out again behind its back. Deleting an
// unknown subnet succeeds: deletes are retried by the controller.
func (m *IPAM) DeleteSubnet(name string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	s := m.subnets[name]
	if s == nil {
		return nil
	}
	if n := len(s.byIP); n > 0 {
		return errorf(ErrInUse, "subnet %s still has %d allocated addresses", name, n)
	}
	delete(m.subnets, name)
	return nil
}

// AddOrUpdatePool registers or replaces a pool of a subnet. Its ranges must lie inside the
// subnet's CIDRs (ErrOutOfRange) and must not overlap another pool of the subnet (ErrConflict):
// an address must belong to at most one pool. Gateway and excluded addresses inside a pool are
// simply never handed out. Addresses already held by non-members are kept (see Misplaced).
func (m *IPAM) AddOrUpdatePool(subnetName, name string, ranges []Range) error {
	if name == "" || len(ranges) == 0 {
		return errorf(ErrInvalid, "pool %q of subnet %s: a name and at least one range are required", name, subnetName)
	}
	var byFam [2][]Range
	for _, r := range ranges {
		if !r.First.IsValid() || r.First.BitLen() != r.Last.BitLen() || r.First.Compare(r.Last) > 0 {
			return errorf(ErrInvalid, "pool %s: range %s is malformed", name, r)
		}
		byFam[famIndex(r.First)] = append(byFam[famIndex(r.First)], r)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	s := m.subnets[subnetName]
	if s == nil {
		return errorf(ErrNoSubnet, "pool %s: subnet %s", name, subnetName)
	}
	for _, r := range ranges {
		f := s.fams[famIndex(r.First)]
		if f == nil || !r.inPrefix(f.prefix) {
			return errorf(ErrOutOfRange, "pool %s: range %s is outside subnet %s", name, r, subnetName)
		}
	}
	p := s.pools[name]
	if p == nil {
		p = &pool{}
	}
	var norm [2]rangeSet
	for i := range byFam {
		norm[i] = normalize(byFam[i])
		for other, q := range s.pools {
			if other != name && len(intersect(norm[i], q.ranges[i])) > 0 {
				return errorf(ErrConflict, "pool %s overlaps pool %s of subnet %s", name, other, subnetName)
			}
		}
	}
	p.ranges = norm
	s.pools[name] = p
	s.rebuild()
	return nil
}

// DeletePool forgets a pool; its free addresses join the subnet's dynamic space. It fails with
// ErrInUse while an owner holds an address allocated from it. Unknown pools or subnets succeed.
func (m *IPAM) DeletePool(subnetName, name string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	s := m.subnets[subnetName]
	if s == nil || s.pools[name] == nil {
		return nil
	}
	for _, owner := range s.byIP {
		if m.owners[owner].pool == name {
			return errorf(ErrInUse, "pool %s of subnet %s is still used by %s", name, subnetName, owner)
		}
	}
	delete(s.pools, name)
	s.rebuild()
	return nil
}
