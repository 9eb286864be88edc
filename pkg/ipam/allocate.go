package ipam

import (
	"fmt"
	"net/netip"
	"slices"
)

// Request asks for the addresses of one owner.
type Request struct {
	// Owner is a stable key such as "namespace/pod". A StatefulSet pod has the same key after
	// delete/recreate, so as long as the caller does not Release it, it gets its address back.
	Owner  string
	Subnet string
	// Pool, when set, takes the addresses of the families the pool covers from the pool only;
	// families the pool has no range for come from the subnet's dynamic space.
	Pool string
	// IPs are static addresses, at most one per family. Families without one get a dynamic
	// address. Each must be inside the subnet (and the pool, if set), not excluded, not a
	// gateway, and not held by another owner.
	IPs []netip.Addr
	// MAC is a static unicast MAC; empty means generate one. Any form net.ParseMAC reads is
	// accepted; allocations carry the lower-case colon form.
	MAC string
	// NoMAC takes addresses only, for one that rides on a port with a MAC of its own (a node's
	// masquerade address on its ovn0 port): the allocation's MAC is empty. An owner that
	// already holds a MAC keeps it.
	NoMAC bool
}

// Allocation is what an owner holds.
type Allocation struct {
	Subnet string
	// Pool is the pool the addresses came from ("" for none). Restore accepts it empty and then
	// infers it from the addresses, since pods may get a pool through their namespace.
	Pool string
	IPs  []netip.Addr // IPv4 first, then IPv6
	MAC  string
}

// pick is one address chosen for an allocation before anything is committed.
type pick struct {
	addr    netip.Addr
	dynamic bool
}

// Allocate gives req.Owner one address per family of the subnet and a MAC. It is idempotent per
// owner: while the owner holds an allocation that fits the request it is returned unchanged,
// which makes controller retries safe; one that does not fit (other subnet, other static IPs,
// MAC or pool) gives ErrOwnerMismatch. Dynamic addresses are the lowest free ones after the
// previous dynamic allocation (round robin), so a just-released address is not reused at once
// and a stale ARP/conntrack entry elsewhere does not hit a new pod. Nothing changes on error.
func (m *IPAM) Allocate(req Request) (Allocation, error) {
	if req.Owner == "" {
		return Allocation{}, errorf(ErrInvalid, "request without owner")
	}
	statics, err := byFamily(req.IPs)
	if err != nil {
		return Allocation{}, wrapOwner(req.Owner, err)
	}
	if req.NoMAC && req.MAC != "" {
		return Allocation{}, errorf(ErrInvalid, "%s: both a MAC and no MAC requested", req.Owner)
	}
	if req.MAC != "" {
		if req.MAC, err = canonicalMAC(req.MAC); err != nil {
			return Allocation{}, wrapOwner(req.Owner, err)
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if rec := m.owners[req.Owner]; rec != nil {
		return rec.fits(req, statics)
	}
	s := m.subnets[req.Subnet]
	if s == nil {
		return Allocation{}, errorf(ErrNoSubnet, "%s: subnet %q", req.Owner, req.Subnet)
	}
	var p *pool
	if req.Pool != "" {
		if p = s.pools[req.Pool]; p == nil {
			return Allocation{}, errorf(ErrNoPool, "%s: pool %q of subnet %s", req.Owner, req.Pool, req.Subnet)
		}
	}
	picks, err := s.pick(req, p, statics)
	if err != nil {
		return Allocation{}, err
	}
	mac := req.MAC
	if mac == "" && !req.NoMAC {
		mac, err = s.generateMAC(picks)
	} else if other, held := s.macs[mac]; held {
		err = errorf(ErrConflict, "%s: MAC %s is held by %s in subnet %s", req.Owner, mac, other, req.Subnet)
	}
	if err != nil {
		return Allocation{}, err
	}
	rec := &record{subnet: req.Subnet, pool: req.Pool, mac: mac}
	for _, pk := range picks {
		s.take(pk.addr, req.Owner)
		if pk.dynamic {
			s.setCursor(pk.addr, p)
		}
		rec.ips = append(rec.ips, pk.addr)
	}
	if mac != "" {
		s.macs[mac] = req.Owner
	}
	m.owners[req.Owner] = rec
	return rec.allocation(), nil
}

// byFamily sorts requested addresses into [IPv4, IPv6], rejecting what cannot be a pod address.
func byFamily(ips []netip.Addr) ([2]netip.Addr, error) {
	var out [2]netip.Addr
	for _, a := range ips {
		if !a.IsValid() || a.Zone() != "" || a.Is4In6() {
			return out, errorf(ErrInvalid, "%q is not a plain IPv4 or IPv6 address", a)
		}
		i := famIndex(a)
		if out[i].IsValid() {
			return out, errorf(ErrInvalid, "two %s addresses (%s, %s); give at most one per family", famName(i), out[i], a)
		}
		out[i] = a
	}
	return out, nil
}

func wrapOwner(owner string, err error) error {
	return fmt.Errorf("%s: %w", owner, err)
}

// fits returns the owner's allocation if the request asks for nothing it does not have.
func (r *record) fits(req Request, statics [2]netip.Addr) (Allocation, error) {
	mismatch := func(what string) (Allocation, error) {
		return Allocation{}, errorf(ErrOwnerMismatch, "%s already holds %v (MAC %s) in subnet %s; %s",
			req.Owner, r.ips, r.mac, r.subnet, what)
	}
	if r.subnet != req.Subnet {
		return mismatch("subnet " + req.Subnet + " was requested")
	}
	for _, a := range statics {
		if a.IsValid() && !slices.Contains(r.ips, a) {
			return mismatch("static IP " + a.String() + " was requested")
		}
	}
	if req.MAC != "" && req.MAC != r.mac {
		return mismatch("static MAC " + req.MAC + " was requested")
	}
	// An empty req.Pool is not checked: a restored allocation may have had its pool inferred.
	if req.Pool != "" && req.Pool != r.pool {
		return mismatch("pool " + req.Pool + " was requested")
	}
	return r.allocation(), nil
}

// pick chooses one address per family without changing anything, so that a failure in the
// second family needs no rollback of the first.
func (s *subnet) pick(req Request, p *pool, statics [2]netip.Addr) ([]pick, error) {
	var picks []pick
	for i, f := range s.fams {
		if a := statics[i]; a.IsValid() {
			if err := s.checkStatic(a, req.Pool, p); err != nil {
				return nil, wrapOwner(req.Owner, err)
			}
			picks = append(picks, pick{addr: a})
			continue
		}
		if f == nil {
			continue
		}
		var a netip.Addr
		ok := false
		if p != nil && len(p.ranges[i]) > 0 {
			// Pool exhaustion must not spill into the subnet: the pool is the contract.
			if a, ok = p.free[i].next(p.cursor[i]); !ok {
				return nil, errorf(ErrExhausted, "%s: pool %s of subnet %s has no free %s address", req.Owner, req.Pool, req.Subnet, famName(i))
			}
		} else if a, ok = f.free.next(f.cursor); !ok {
			return nil, errorf(ErrExhausted, "%s: subnet %s has no free %s address", req.Owner, req.Subnet, famName(i))
		}
		picks = append(picks, pick{addr: a, dynamic: true})
	}
	return picks, nil
}

// checkStatic says why a requested static address cannot be given to a request for poolName.
func (s *subnet) checkStatic(a netip.Addr, poolName string, p *pool) error {
	i := famIndex(a)
	f := s.fams[i]
	switch {
	case f == nil || !f.prefix.Contains(a):
		return errorf(ErrOutOfRange, "static IP %s is outside the subnet's CIDRs", a)
	case a == f.prefix.Addr() || a == f.broadcast():
		return errorf(ErrOutOfRange, "static IP %s is the network or broadcast address of %s", a, f.prefix)
	case a == f.gateway:
		return errorf(ErrConflict, "static IP %s is the subnet's gateway", a)
	case f.excluded.contains(a):
		return errorf(ErrOutOfRange, "static IP %s is in the subnet's excluded ranges", a)
	}
	if owner, held := s.byIP[a]; held {
		return errorf(ErrConflict, "static IP %s is held by %s", a, owner)
	}
	in, _ := s.poolOf(a)
	switch {
	case p != nil && len(p.ranges[i]) > 0 && in != poolName:
		return errorf(ErrOutOfRange, "static IP %s is outside pool %s", a, poolName)
	case in != "" && in != poolName:
		return errorf(ErrOutOfRange, "static IP %s is reserved for IP pool %s", a, in)
	}
	return nil
}

// poolOf returns the pool whose usable ranges hold a.
func (s *subnet) poolOf(a netip.Addr) (string, *pool) {
	for name, p := range s.pools {
		if p.usable[famIndex(a)].contains(a) {
			return name, p
		}
	}
	return "", nil
}

// take marks a as held by owner, removing it from whichever free set has it.
func (s *subnet) take(a netip.Addr, owner string) {
	i := famIndex(a)
	if _, p := s.poolOf(a); p != nil {
		if p.free[i].remove(a) {
			p.used[i]++
		}
	} else if f := s.fams[i]; f != nil {
		f.free.remove(a)
	}
	s.byIP[a] = owner
	s.used[i]++
}

// give returns a to the free set it belongs to under the current configuration; an address that
// is no longer allocatable (excluded or outside the CIDRs since) just stops being held.
func (s *subnet) give(a netip.Addr) {
	i := famIndex(a)
	delete(s.byIP, a)
	s.used[i]--
	if _, p := s.poolOf(a); p != nil {
		if p.free[i].insert(a) {
			p.used[i]--
		}
	} else if f := s.fams[i]; f != nil && f.usable.contains(a) {
		f.free.insert(a)
	}
}

// setCursor moves the round-robin cursor of the space a was picked from.
func (s *subnet) setCursor(a netip.Addr, p *pool) {
	i := famIndex(a)
	if p != nil && p.usable[i].contains(a) {
		p.cursor[i] = a
	} else if f := s.fams[i]; f != nil {
		f.cursor = a
	}
}
