package ipam

import (
	"math"
	"math/rand/v2"
	"net/netip"
	"testing"
)

// v4 maps a small integer to 10.0.x.y, so a rangeSet can be compared with a map model.
func v4(n int) netip.Addr { return netip.AddrFrom4([4]byte{10, 0, byte(n >> 8), byte(n)}) }

// checkSet asserts the rangeSet invariants and equality with model over [0, space).
func checkSet(t *testing.T, s rangeSet, model map[int]bool, space int) {
	t.Helper()
	for i, r := range s {
		if r.First.Compare(r.Last) > 0 {
			t.Fatalf("range %d reversed: %v", i, s)
		}
		if i > 0 && s[i-1].Last.Next().Compare(r.First) >= 0 {
			t.Fatalf("ranges %d and %d overlap or touch: %v", i-1, i, s)
		}
	}
	n := 0
	for x := 0; x < space; x++ {
		if s.contains(v4(x)) != model[x] {
			t.Fatalf("contains(%v)=%v, model %v; set %v", v4(x), s.contains(v4(x)), model[x], s)
		}
		if model[x] {
			n++
		}
	}
	if s.size() != uint64(n) {
		t.Fatalf("size %d, model %d", s.size(), n)
	}
}

func TestRangeSetAgainstModel(t *testing.T) {
	const space = 64
	rng := rand.New(rand.NewPCG(1, 2))
	var s rangeSet
	model := map[int]bool{}
	for step := 0; step < 3000; step++ {
		x := rng.IntN(space)
		if rng.IntN(2) == 0 {
			if got := s.insert(v4(x)); got == model[x] {
				t.Fatalf("insert(%d)=%v with model %v", x, got, model[x])
			}
			model[x] = true
		} else {
			if got := s.remove(v4(x)); got != model[x] {
				t.Fatalf("remove(%d)=%v with model %v", x, got, model[x])
			}
			delete(model, x)
		}
		checkSet(t, s, model, space)
		// next must be the lowest member above the cursor, else the lowest member.
		cur := rng.IntN(space)
		want, wantOK := -1, len(model) > 0
		for y := cur + 1; y < space && want < 0; y++ {
			if model[y] {
				want = y
			}
		}
		for y := 0; y < space && want < 0; y++ {
			if model[y] {
				want = y
			}
		}
		got, ok := s.next(v4(cur))
		if ok != wantOK || (ok && got != v4(want)) {
			t.Fatalf("next(%d)=%v,%v want %d,%v; set %v", cur, got, ok, want, wantOK, s)
		}
	}
}

func TestSubtractIntersectAgainstModel(t *testing.T) {
	const space = 48
	rng := rand.New(rand.NewPCG(3, 4))
	randomSet := func() (rangeSet, map[int]bool) {
		var rs []Range
		m := map[int]bool{}
		for k := rng.IntN(6); k > 0; k-- {
			a := rng.IntN(space)
			b := a + rng.IntN(space-a)
			rs = append(rs, Range{First: v4(a), Last: v4(b)})
			for x := a; x <= b; x++ {
				m[x] = true
			}
		}
		return normalize(rs), m
	}
	for round := 0; round < 500; round++ {
		a, ma := randomSet()
		b, mb := randomSet()
		checkSet(t, a, ma, space)
		diff, both := map[int]bool{}, map[int]bool{}
		for x := range ma {
			if mb[x] {
				both[x] = true
			} else {
				diff[x] = true
			}
		}
		checkSet(t, subtract(a, b), diff, space)
		checkSet(t, intersect(a, b), both, space)
	}
}

func TestRangeLenAndSize(t *testing.T) {
	for _, tc := range []struct {
		prefix string
		want   uint64
	}{
		{"10.0.0.7/32", 1},
		{"10.0.0.0/29", 8},
		{"10.16.0.0/16", 65536},
		{"0.0.0.0/0", 1 << 32},
		{"fd00::/126", 4},
		{"fd00::/65", 1 << 63},
		{"fd00::/64", math.MaxUint64}, // 2^64 saturates
		{"::/0", math.MaxUint64},
	} {
		p := netip.MustParsePrefix(tc.prefix)
		r := Range{First: p.Addr(), Last: lastOf(p)}
		if got := rangeLen(r); got != tc.want {
			t.Errorf("rangeLen(%s)=%d, want %d", tc.prefix, got, tc.want)
		}
	}
	two := rangeSet{{First: netip.MustParseAddr("fd00::"), Last: netip.MustParseAddr("fd00::ffff:ffff:ffff:ffff")},
		{First: netip.MustParseAddr("fd01::"), Last: netip.MustParseAddr("fd01::")}}
	if two.size() != math.MaxUint64 {
		t.Errorf("size of 2^64+1 addresses = %d, want saturation", two.size())
	}
	if toInt64(math.MaxUint64) != math.MaxInt64 || toInt64(5) != 5 {
		t.Error("toInt64 does not cap")
	}
}

func lastOf(p netip.Prefix) netip.Addr {
	b := p.Addr().AsSlice()
	for i := p.Bits(); i < len(b)*8; i++ {
		b[i/8] |= 0x80 >> (i % 8)
	}
	a, _ := netip.AddrFromSlice(b)
	return a
}

func TestRangeSetEdges(t *testing.T) {
	max4 := netip.MustParseAddr("255.255.255.255")
	s := normalize([]Range{{First: netip.MustParseAddr("255.255.255.250"), Last: max4},
		{First: netip.MustParseAddr("255.255.255.240"), Last: netip.MustParseAddr("255.255.255.249")}})
	if len(s) != 1 || s[0].Last != max4 {
		t.Fatalf("normalize at the top of the space: %v", s)
	}
	if !s.remove(max4) || s.contains(max4) || !s.insert(max4) || len(s) != 1 {
		t.Fatalf("remove/insert of the last address: %v", s)
	}
	if a, ok := s.next(max4); !ok || a != netip.MustParseAddr("255.255.255.240") {
		t.Fatalf("next after the last address should wrap, got %v %v", a, ok)
	}
	if _, ok := (rangeSet{}).next(netip.Addr{}); ok {
		t.Fatal("next on an empty set")
	}
	got := addrSet([]netip.Addr{v4(5), v4(3), v4(4), v4(9), v4(9)})
	if len(got) != 2 || got[0] != (Range{First: v4(3), Last: v4(5)}) || got[1] != (Range{First: v4(9), Last: v4(9)}) {
		t.Fatalf("addrSet: %v", got)
	}
}
