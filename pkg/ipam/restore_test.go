package ipam

import (
	"fmt"
	"net/netip"
	"sync"
	"testing"

	"github.com/kovn/kovn/api/v1alpha1"
)

// configure gives m the subnets and pools of the restart test.
func configure(t *testing.T, m *IPAM) {
	t.Helper()
	addSpec(t, m, "sn", v1alpha1.SubnetSpec{CIDRBlock: "10.0.0.0/23,fd00::/64", ExcludeIPs: []string{"10.0.1.0..10.0.1.9"}})
	wantErr(t, m.AddOrUpdatePool("sn", "p", ranges(t, "10.0.1.200..10.0.1.239")), nil, "")
}

// TestRestoreAfterRestart allocates in one IPAM, "restarts" by restoring every allocation into a
// new one, and checks that the new one returns the same allocations and never hands out a
// restored address again.
func TestRestoreAfterRestart(t *testing.T) {
	before := New()
	configure(t, before)
	for i := 0; i < 300; i++ {
		req := Request{Owner: owner(i), Subnet: "sn"}
		switch i % 10 {
		case 3:
			req.IPs = addrs(t, fmt.Sprintf("10.0.1.%d", 100+i/10))
		case 5:
			req.Pool = "p"
		case 7:
			req.MAC = fmt.Sprintf("02:00:00:00:%02x:%02x", i>>8, i&0xff)
		}
		mustAlloc(t, before, req)
	}
	for i := 0; i < 300; i += 4 {
		before.Release(owner(i))
	}
	after := New()
	configure(t, after)
	held := map[netip.Addr]string{}
	for i := 0; i < 300; i++ {
		a, ok := before.Lookup(owner(i))
		if !ok {
			continue
		}
		if i%2 == 1 {
			a.Pool = "" // the controller may not know the pool; Restore infers it
		}
		wantErr(t, after.Restore(owner(i), a), nil, "")
		wantErr(t, after.Restore(owner(i), a), nil, "") // idempotent
		for _, ip := range a.IPs {
			held[ip] = owner(i)
		}
	}
	for i := 0; i < 300; i++ {
		a, _ := before.Lookup(owner(i))
		b, _ := after.Lookup(owner(i))
		if fmt.Sprint(a) != fmt.Sprint(b) {
			t.Fatalf("%s: restored %+v, had %+v", owner(i), b, a)
		}
		if a.IPs != nil {
			// The controller re-runs Allocate for running pods: the same answer, even with the pool.
			got := mustAlloc(t, after, Request{Owner: owner(i), Subnet: "sn", Pool: a.Pool})
			if fmt.Sprint(got) != fmt.Sprint(a) {
				t.Fatalf("%s: Allocate after restore %+v, had %+v", owner(i), got, a)
			}
		}
	}
	ub, _ := before.Usage("sn")
	ua, _ := after.Usage("sn")
	if ua != ub {
		t.Fatalf("usage after restore %+v, before %+v", ua, ub)
	}
	pb, _ := before.PoolUsage("sn", "p")
	pa, _ := after.PoolUsage("sn", "p")
	if pa != pb {
		t.Fatalf("pool usage after restore %+v, before %+v", pa, pb)
	}
	allocateUntilFull(t, after, held)
}

// allocateUntilFull allocates pool and non-pool owners until the subnet's IPv4 space is
// exhausted, failing on any address already in held.
func allocateUntilFull(t *testing.T, m *IPAM, held map[netip.Addr]string) {
	t.Helper()
	for i := 1000; ; i++ {
		req := Request{Owner: owner(i), Subnet: "sn"}
		if i%3 == 0 {
			req.Pool = "p"
		}
		a, err := m.Allocate(req)
		if err != nil {
			wantErr(t, err, ErrExhausted, "")
			if req.Pool == "" {
				return
			}
			continue
		}
		for _, ip := range a.IPs {
			if o, dup := held[ip]; dup {
				t.Fatalf("%s got %s, held by %s", owner(i), ip, o)
			}
			held[ip] = owner(i)
		}
	}
}

// TestRestoreCursor: the first address handed out after a restart is past the restored ones, so
// addresses freed just before the restart are not reused first.
func TestRestoreCursor(t *testing.T) {
	m := newWith(t, "10.0.0.0/24")
	for i, ip := range []string{"10.0.0.2", "10.0.0.9", "10.0.0.4"} {
		wantErr(t, m.Restore(owner(i), Allocation{Subnet: "sn", IPs: addrs(t, ip)}), nil, "")
	}
	if a := mustAlloc(t, m, Request{Owner: "ns/new", Subnet: "sn"}); a.IPs[0] != addr(t, "10.0.0.10") {
		t.Fatalf("first allocation after restore: %v", a.IPs)
	}
}

func TestRestoreConflicts(t *testing.T) {
	setup := func(t *testing.T) *IPAM {
		m := newWith(t, "10.0.0.0/24,fd00::/64", "10.0.0.100")
		wantErr(t, m.Restore("ns/a", Allocation{Subnet: "sn", IPs: addrs(t, "10.0.0.5", "fd00::5"), MAC: "02:00:00:00:00:05"}), nil, "")
		return m
	}
	for _, tc := range []struct {
		name     string
		owner    string
		a        Allocation
		sentinel error
		frag     string
	}{
		{"address of another owner", "ns/b", Allocation{Subnet: "sn", IPs: addrs(t, "10.0.0.6", "fd00::5")}, ErrConflict, "fd00::5 is held by ns/a"},
		{"MAC of another owner", "ns/b", Allocation{Subnet: "sn", IPs: addrs(t, "10.0.0.6"), MAC: "02:00:00:00:00:05"}, ErrConflict, "MAC 02:00:00:00:00:05 is held by ns/a"},
		{"outside CIDR", "ns/b", Allocation{Subnet: "sn", IPs: addrs(t, "10.0.1.6")}, ErrConflict, "outside the subnet's CIDRs"},
		{"gateway", "ns/b", Allocation{Subnet: "sn", IPs: addrs(t, "10.0.0.1")}, ErrConflict, "gateway"},
		{"network", "ns/b", Allocation{Subnet: "sn", IPs: addrs(t, "fd00::")}, ErrConflict, "network or broadcast"},
		{"broadcast", "ns/b", Allocation{Subnet: "sn", IPs: addrs(t, "10.0.0.255")}, ErrConflict, "network or broadcast"},
		{"no subnet", "ns/b", Allocation{Subnet: "nope", IPs: addrs(t, "10.0.0.6")}, ErrNoSubnet, "nope"},
		{"no IPs", "ns/b", Allocation{Subnet: "sn"}, ErrInvalid, "at least one IP"},
		{"no owner", "", Allocation{Subnet: "sn", IPs: addrs(t, "10.0.0.6")}, ErrInvalid, "owner"},
		{"two v4", "ns/b", Allocation{Subnet: "sn", IPs: addrs(t, "10.0.0.6", "10.0.0.7")}, ErrInvalid, "one per family"},
		{"bad MAC", "ns/b", Allocation{Subnet: "sn", IPs: addrs(t, "10.0.0.6"), MAC: "01:00:00:00:00:01"}, ErrInvalid, "multicast"},
		{"owner holds other", "ns/a", Allocation{Subnet: "sn", IPs: addrs(t, "10.0.0.6")}, ErrOwnerMismatch, "already holds"},
		{"same again", "ns/a", Allocation{Subnet: "sn", IPs: addrs(t, "fd00::5", "10.0.0.5"), MAC: "02:00:00:00:00:05"}, nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := setup(t)
			wantErr(t, m.Restore(tc.owner, tc.a), tc.sentinel, tc.frag)
			if tc.sentinel == nil {
				return
			}
			// All or nothing: a failed restore holds no address.
			if _, held := m.OwnerOf("sn", addr(t, "10.0.0.6")); held {
				t.Fatal("failed restore holds 10.0.0.6")
			}
			if u, _ := m.Usage("sn"); u.V4Used != 1 || u.V6Used != 1 {
				t.Fatalf("failed restore changed usage: %+v", u)
			}
		})
	}
}

// TestRestoreExcluded: an address that was excluded after it was handed out is restored (the pod
// runs with it) and reported.
func TestRestoreExcluded(t *testing.T) {
	m := newWith(t, "10.0.0.0/24", "10.0.0.100")
	wantErr(t, m.Restore("ns/a", Allocation{Subnet: "sn", IPs: addrs(t, "10.0.0.100")}), nil, "")
	mis, _ := m.Misplaced("sn")
	if len(mis) != 1 || mis[0].Owner != "ns/a" || mis[0].Reason != "in the subnet's excluded ranges" {
		t.Fatalf("Misplaced: %+v", mis)
	}
	_, err := m.Allocate(Request{Owner: "ns/b", Subnet: "sn", IPs: addrs(t, "10.0.0.100")})
	wantErr(t, err, ErrOutOfRange, "excluded")
	if got := m.Owners("sn"); len(got) != 1 || got[0] != "ns/a" {
		t.Fatalf("Owners: %v", got)
	}
}

// TestConcurrentAllocate runs many goroutines allocating, releasing and reading at once; with
// -race this also checks the locking. Every live address must have exactly one owner.
func TestConcurrentAllocate(t *testing.T) {
	m := newWith(t, "10.0.0.0/20,fd00::/64")
	const workers, each = 8, 300
	var wg sync.WaitGroup
	errs := make(chan error, workers+1)
	cidrs, gws := prefixes(t, "10.0.0.0/20", "fd00::/64"), addrs(t, "10.0.0.1", "fd00::1")
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; i < each; i++ {
				o := fmt.Sprintf("ns/w%d-%d", w, i)
				if _, err := m.Allocate(Request{Owner: o, Subnet: "sn"}); err != nil {
					errs <- err
					return
				}
				if i%3 == 0 {
					m.Release(o)
				}
				if _, err := m.Usage("sn"); err != nil {
					errs <- err
					return
				}
			}
		}(w)
	}
	// Subnet updates (full rebuilds) race with the allocations and must not lose any.
	stop := make(chan struct{})
	updated := make(chan struct{})
	go func() {
		defer close(updated)
		for {
			select {
			case <-stop:
				return
			default:
				if err := m.AddOrUpdateSubnet("sn", cidrs, gws, nil); err != nil {
					errs <- err
					return
				}
			}
		}
	}()
	wg.Wait()
	close(stop)
	<-updated
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	seen := map[netip.Addr]string{}
	live := 0
	for w := 0; w < workers; w++ {
		for i := 0; i < each; i++ {
			o := fmt.Sprintf("ns/w%d-%d", w, i)
			a, ok := m.Lookup(o)
			if ok != (i%3 != 0) {
				t.Fatalf("%s: held=%v", o, ok)
			}
			if !ok {
				continue
			}
			live++
			for _, ip := range a.IPs {
				if prev, dup := seen[ip]; dup {
					t.Fatalf("%s given to %s and %s", ip, prev, o)
				}
				seen[ip] = o
				if got, _ := m.OwnerOf("sn", ip); got != o {
					t.Fatalf("OwnerOf(%s)=%s, want %s", ip, got, o)
				}
			}
		}
	}
	if u, _ := m.Usage("sn"); u.V4Used != int64(live) || u.V6Used != int64(live) || u.V4Available != 4093-int64(live) {
		t.Fatalf("usage %+v with %d live owners", u, live)
	}
}
