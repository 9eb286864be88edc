package ipam

import (
	"net/netip"
	"slices"
)

// Restore re-registers an allocation read back from the API (pod annotations) after a restart,
// before any new Allocate, so new pods never get an address a running pod already has. It is
// all or nothing. An address outside the subnet's CIDRs, the network/broadcast address, the
// gateway, or an address or MAC held by another owner gives ErrConflict: the caller reports the
// pod and does not wire it with a duplicate. An excluded address, or one inside a pool the
// allocation does not name, is accepted as it was valid when handed out (see Misplaced).
// Restoring the same allocation twice is a no-op; a different one for the same owner gives
// ErrOwnerMismatch. Dynamic cursors advance past restored addresses so that addresses freed just
// before the restart are not the first ones handed out after it.
func (m *IPAM) Restore(owner string, a Allocation) error {
	if owner == "" || len(a.IPs) == 0 {
		return errorf(ErrInvalid, "restore %q: owner and at least one IP are required", owner)
	}
	fams, err := byFamily(a.IPs)
	if err != nil {
		return wrapOwner(owner, err)
	}
	if a.MAC != "" {
		if a.MAC, err = canonicalMAC(a.MAC); err != nil {
			return wrapOwner(owner, err)
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	s := m.subnets[a.Subnet]
	if s == nil {
		return errorf(ErrNoSubnet, "restore %s: subnet %q", owner, a.Subnet)
	}
	ips := compact(fams)
	if rec := m.owners[owner]; rec != nil {
		if rec.subnet == a.Subnet && slices.Equal(rec.ips, ips) && rec.mac == a.MAC && (a.Pool == "" || a.Pool == rec.pool) {
			return nil
		}
		return errorf(ErrOwnerMismatch, "restore %s: already holds %v (MAC %s) in subnet %s", owner, rec.ips, rec.mac, rec.subnet)
	}
	for _, ip := range ips {
		if why := s.checkRestore(ip); why != "" {
			return errorf(ErrConflict, "restore %s in subnet %s: %s %s", owner, a.Subnet, ip, why)
		}
	}
	if other, held := s.macs[a.MAC]; a.MAC != "" && held {
		return errorf(ErrConflict, "restore %s in subnet %s: MAC %s is held by %s", owner, a.Subnet, a.MAC, other)
	}
	rec := &record{subnet: a.Subnet, pool: a.Pool, ips: ips, mac: a.MAC}
	for _, ip := range ips {
		s.take(ip, owner)
		s.advanceCursor(ip)
		if name, _ := s.poolOf(ip); rec.pool == "" {
			rec.pool = name
		}
	}
	if a.MAC != "" {
		s.macs[a.MAC] = owner
	}
	m.owners[owner] = rec
	return nil
}

// checkRestore says why a restored address would collide with something ("" if it would not).
func (s *subnet) checkRestore(a netip.Addr) string {
	f := s.fams[famIndex(a)]
	switch {
	case f == nil || !f.prefix.Contains(a):
		return "is outside the subnet's CIDRs"
	case a == f.prefix.Addr() || a == f.broadcast():
		return "is the network or broadcast address of " + f.prefix.String()
	case a == f.gateway:
		return "is the subnet's gateway"
	}
	if other, held := s.byIP[a]; held {
		return "is held by " + other
	}
	return ""
}

// advanceCursor moves the cursor of a's space forward to a, never backward.
func (s *subnet) advanceCursor(a netip.Addr) {
	i := famIndex(a)
	if _, p := s.poolOf(a); p != nil {
		if !p.cursor[i].IsValid() || p.cursor[i].Less(a) {
			p.cursor[i] = a
		}
	} else if f := s.fams[i]; f != nil && f.usable.contains(a) {
		if !f.cursor.IsValid() || f.cursor.Less(a) {
			f.cursor = a
		}
	}
}

func compact(fams [2]netip.Addr) []netip.Addr {
	var out []netip.Addr
	for _, a := range fams {
		if a.IsValid() {
			out = append(out, a)
		}
	}
	return out
}

// Release frees everything owner holds and returns it. Releasing an unknown owner returns false,
// so pod deletes can be retried.
func (m *IPAM) Release(owner string) (Allocation, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	rec := m.owners[owner]
	if rec == nil {
		return Allocation{}, false
	}
	if s := m.subnets[rec.subnet]; s != nil {
		for _, ip := range rec.ips {
			s.give(ip)
		}
		if s.macs[rec.mac] == owner {
			delete(s.macs, rec.mac)
		}
	}
	delete(m.owners, owner)
	return rec.allocation(), true
}

// Lookup returns what owner holds.
func (m *IPAM) Lookup(owner string) (Allocation, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if rec := m.owners[owner]; rec != nil {
		return rec.allocation(), true
	}
	return Allocation{}, false
}

// OwnerOf returns who holds ip in subnet.
func (m *IPAM) OwnerOf(subnetName string, ip netip.Addr) (string, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if s := m.subnets[subnetName]; s != nil {
		owner, ok := s.byIP[ip]
		return owner, ok
	}
	return "", false
}

// Owners returns the owners holding addresses in subnet, sorted, e.g. for garbage collection of
// owners whose pods are gone.
func (m *IPAM) Owners(subnetName string) []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []string
	if s := m.subnets[subnetName]; s != nil {
		for _, owner := range s.byIP {
			out = append(out, owner)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}
