package ipam

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"testing"
)

// Benchmarks print figures only (go test -run '^$' -bench . ./pkg/ipam/); no time limits are
// asserted, since the machine running the tests is unknown.

// BenchmarkAllocate16 allocates into a fresh /16, starting over before it is full.
func BenchmarkAllocate16(b *testing.B) {
	const fill = 60000
	var m *IPAM
	owners := make([]string, fill)
	for i := range owners {
		owners[i] = fmt.Sprintf("ns/pod-%d", i)
	}
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if i%fill == 0 {
			b.StopTimer()
			m = newWith(b, "10.16.0.0/16")
			b.StartTimer()
		}
		if _, err := m.Allocate(Request{Owner: owners[i%fill], Subnet: "sn"}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkChurn16 is the steady state of a busy cluster: a /16 with 50k pods, one pod deleted
// and one created per iteration, so the free space is fragmented.
func BenchmarkChurn16(b *testing.B) {
	const live = 50000
	m := newWith(b, "10.16.0.0/16")
	owners := make([]string, live)
	for i := range owners {
		owners[i] = fmt.Sprint(i)
		if _, err := m.Allocate(Request{Owner: owners[i], Subnet: "sn"}); err != nil {
			b.Fatal(err)
		}
	}
	rng := rand.New(rand.NewPCG(1, 1))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		// Release a random live owner, so holes appear all over the range.
		k := rng.IntN(live)
		m.Release(owners[k])
		owners[k] = fmt.Sprint(live + i)
		if _, err := m.Allocate(Request{Owner: owners[k], Subnet: "sn"}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkAllocateDualStack64 allocates one IPv4 (/16) and one IPv6 (/64) address per owner.
func BenchmarkAllocateDualStack64(b *testing.B) {
	m := newWith(b, "10.16.0.0/16,fd00:10:16::/64")
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if i > 0 && i%60000 == 0 {
			b.StopTimer()
			m = newWith(b, "10.16.0.0/16,fd00:10:16::/64")
			b.StartTimer()
		}
		if _, err := m.Allocate(Request{Owner: fmt.Sprint(i), Subnet: "sn"}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkUpdateSubnet50k measures a Subnet update (full rebuild) with 50k held addresses.
func BenchmarkUpdateSubnet50k(b *testing.B) {
	m := newWith(b, "10.16.0.0/16")
	for i := 0; i < 50000; i++ {
		if _, err := m.Allocate(Request{Owner: fmt.Sprint(i), Subnet: "sn"}); err != nil {
			b.Fatal(err)
		}
	}
	cidrs := []netip.Prefix{netip.MustParsePrefix("10.16.0.0/16")}
	gws := []netip.Addr{netip.MustParseAddr("10.16.0.1")}
	ex := []Range{{First: netip.MustParseAddr("10.16.200.0"), Last: netip.MustParseAddr("10.16.200.255")}}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := m.AddOrUpdateSubnet("sn", cidrs, gws, ex[:i%2]); err != nil {
			b.Fatal(err)
		}
	}
}
