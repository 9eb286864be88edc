package ipam

import (
	"net/netip"
	"slices"
)

// Usage counts addresses per family in the shape of the Subnet and IPPool status fields.
// Available saturates at MaxInt64 (a v6 /64 has 2^64 addresses).
type Usage struct {
	V4Used, V4Available int64
	V6Used, V6Available int64
}

// Usage reports a subnet's counts. Used is every held address of the family, including
// misplaced ones; Available is what could still be handed out, to pool members or not.
func (m *IPAM) Usage(subnetName string) (Usage, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	s := m.subnets[subnetName]
	if s == nil {
		return Usage{}, errorf(ErrNoSubnet, "usage of subnet %q", subnetName)
	}
	var avail [2]uint64
	for i, f := range s.fams {
		if f == nil {
			continue
		}
		avail[i] = f.free.size()
		for _, p := range s.pools {
			avail[i] = satAdd(avail[i], p.free[i].size())
		}
	}
	return Usage{V4Used: s.used[0], V4Available: toInt64(avail[0]), V6Used: s.used[1], V6Available: toInt64(avail[1])}, nil
}

// PoolUsage reports a pool's counts: held and free addresses inside its allocatable ranges.
func (m *IPAM) PoolUsage(subnetName, poolName string) (Usage, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	s := m.subnets[subnetName]
	if s == nil {
		return Usage{}, errorf(ErrNoSubnet, "usage of pool %s: subnet %q", poolName, subnetName)
	}
	p := s.pools[poolName]
	if p == nil {
		return Usage{}, errorf(ErrNoPool, "usage of pool %q of subnet %s", poolName, subnetName)
	}
	return Usage{V4Used: p.used[0], V4Available: toInt64(p.free[0].size()), V6Used: p.used[1], V6Available: toInt64(p.free[1].size())}, nil
}

// Misplaced is a held address that the current configuration would not hand to its owner,
// typically after a subnet or pool update. It stays held (the pod is running with it) until
// the owner releases it; the controller reports it, e.g. as a condition or event.
type Misplaced struct {
	Owner  string
	IP     netip.Addr
	Reason string
}

// Misplaced lists the subnet's misplaced addresses, sorted by owner and address.
func (m *IPAM) Misplaced(subnetName string) ([]Misplaced, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	s := m.subnets[subnetName]
	if s == nil {
		return nil, errorf(ErrNoSubnet, "misplaced addresses of subnet %q", subnetName)
	}
	var out []Misplaced
	for ip, owner := range s.byIP {
		if why := s.misplacedReason(ip, m.owners[owner].pool); why != "" {
			out = append(out, Misplaced{Owner: owner, IP: ip, Reason: why})
		}
	}
	slices.SortFunc(out, func(a, b Misplaced) int {
		if a.Owner != b.Owner {
			if a.Owner < b.Owner {
				return -1
			}
			return 1
		}
		return a.IP.Compare(b.IP)
	})
	return out, nil
}

// misplacedReason says why ip, held by an owner of poolName, no longer fits ("" if it does).
func (s *subnet) misplacedReason(ip netip.Addr, poolName string) string {
	i := famIndex(ip)
	f := s.fams[i]
	switch {
	case f == nil || !f.prefix.Contains(ip):
		return "outside the subnet's CIDRs"
	case ip == f.prefix.Addr() || ip == f.broadcast():
		return "network or broadcast address of " + f.prefix.String()
	case ip == f.gateway:
		return "the subnet's gateway"
	case f.excluded.contains(ip):
		return "in the subnet's excluded ranges"
	}
	in, _ := s.poolOf(ip)
	if in != "" && in != poolName {
		return "reserved for IP pool " + in
	}
	if p := s.pools[poolName]; in == "" && p != nil && len(p.ranges[i]) > 0 {
		return "outside its IP pool " + poolName
	}
	return ""
}
