package ipam

import (
	"encoding/binary"
	"math"
	"math/bits"
	"net/netip"
	"slices"
	"sort"
)

// rangeSet is a set of addresses of one family kept as sorted, disjoint, non-adjacent inclusive
// ranges. Free space is stored this way so that a v6 /64 costs a handful of ranges instead of 2^64
// entries, and so that "lowest free address after the cursor" is one binary search.
type rangeSet []Range

// normalize sorts rs and merges overlapping or adjacent ranges. The input is not modified.
func normalize(rs []Range) rangeSet {
	if len(rs) == 0 {
		return nil
	}
	in := slices.Clone(rs)
	slices.SortFunc(in, func(a, b Range) int { return a.First.Compare(b.First) })
	out := rangeSet{in[0]}
	for _, r := range in[1:] {
		last := &out[len(out)-1]
		if touches(*last, r) {
			if r.Last.Compare(last.Last) > 0 {
				last.Last = r.Last
			}
			continue
		}
		out = append(out, r)
	}
	return out
}

// touches reports whether b (which starts at or after a) overlaps a or starts right after it.
func touches(a, b Range) bool {
	if a.First.BitLen() != b.First.BitLen() {
		return false
	}
	n := a.Last.Next()
	// a ends at the family's last address: every b starting at or after a.First overlaps.
	return !n.IsValid() || b.First.Compare(n) <= 0
}

// search returns the index of the first range whose Last is >= a.
func (s rangeSet) search(a netip.Addr) int {
	return sort.Search(len(s), func(i int) bool { return s[i].Last.Compare(a) >= 0 })
}

func (s rangeSet) contains(a netip.Addr) bool {
	i := s.search(a)
	return i < len(s) && s[i].First.Compare(a) <= 0
}

// remove deletes a from the set and reports whether it was there.
func (s *rangeSet) remove(a netip.Addr) bool {
	i := s.search(a)
	if i == len(*s) || (*s)[i].First.Compare(a) > 0 {
		return false
	}
	r := (*s)[i]
	switch {
	case r.First == r.Last:
		*s = slices.Delete(*s, i, i+1)
	case a == r.First:
		(*s)[i].First = a.Next()
	case a == r.Last:
		(*s)[i].Last = a.Prev()
	default:
		(*s)[i].Last = a.Prev()
		*s = slices.Insert(*s, i+1, Range{First: a.Next(), Last: r.Last})
	}
	return true
}

// insert adds a to the set, merging with neighbours, and reports whether it was missing.
func (s *rangeSet) insert(a netip.Addr) bool {
	i := s.search(a)
	if i < len(*s) && (*s)[i].First.Compare(a) <= 0 {
		return false
	}
	left := i > 0 && (*s)[i-1].Last.Next() == a
	right := i < len(*s) && a.Next() == (*s)[i].First
	switch {
	case left && right:
		(*s)[i-1].Last = (*s)[i].Last
		*s = slices.Delete(*s, i, i+1)
	case left:
		(*s)[i-1].Last = a
	case right:
		(*s)[i].First = a
	default:
		*s = slices.Insert(*s, i, Range{First: a, Last: a})
	}
	return true
}

// next returns the lowest address of the set above after, wrapping around to the lowest address
// of the set when there is none. An invalid after starts from the bottom.
func (s rangeSet) next(after netip.Addr) (netip.Addr, bool) {
	if len(s) == 0 {
		return netip.Addr{}, false
	}
	if !after.IsValid() {
		return s[0].First, true
	}
	i := sort.Search(len(s), func(i int) bool { return s[i].Last.Compare(after) > 0 })
	if i == len(s) {
		return s[0].First, true
	}
	if s[i].First.Compare(after) > 0 {
		return s[i].First, true
	}
	return after.Next(), true
}

// subtract returns a minus b. Both must be normalized; the result is too.
func subtract(a, b rangeSet) rangeSet {
	var out rangeSet
	j := 0
	for _, r := range a {
		// Ranges of b wholly below r cannot touch r or any later range of a.
		for j < len(b) && b[j].Last.Compare(r.First) < 0 {
			j++
		}
		cur, keep := r, true
		for k := j; k < len(b) && b[k].First.Compare(cur.Last) <= 0; k++ {
			if b[k].First.Compare(cur.First) > 0 {
				out = append(out, Range{First: cur.First, Last: b[k].First.Prev()})
			}
			if b[k].Last.Compare(cur.Last) >= 0 {
				keep = false
				break
			}
			cur.First = b[k].Last.Next()
		}
		if keep {
			out = append(out, cur)
		}
	}
	return out
}

// intersect returns the addresses in both a and b. Both must be normalized.
func intersect(a, b rangeSet) rangeSet {
	var out rangeSet
	for i, j := 0, 0; i < len(a) && j < len(b); {
		first, last := maxAddr(a[i].First, b[j].First), minAddr(a[i].Last, b[j].Last)
		if first.Compare(last) <= 0 {
			out = append(out, Range{First: first, Last: last})
		}
		if a[i].Last.Compare(b[j].Last) < 0 {
			i++
		} else {
			j++
		}
	}
	return out
}

// size counts the addresses in the set, saturating at MaxUint64 (a v6 /64 has 2^64).
func (s rangeSet) size() uint64 {
	var n uint64
	for _, r := range s {
		n = satAdd(n, rangeLen(r))
	}
	return n
}

// rangeLen is Last-First+1 in 128-bit arithmetic, saturated to a uint64.
func rangeLen(r Range) uint64 {
	if r.First.Is4() {
		a, b := r.First.As4(), r.Last.As4()
		return uint64(binary.BigEndian.Uint32(b[:])-binary.BigEndian.Uint32(a[:])) + 1
	}
	a, b := r.First.As16(), r.Last.As16()
	lo, borrow := bits.Sub64(binary.BigEndian.Uint64(b[8:]), binary.BigEndian.Uint64(a[8:]), 0)
	hi, _ := bits.Sub64(binary.BigEndian.Uint64(b[:8]), binary.BigEndian.Uint64(a[:8]), borrow)
	lo, carry := bits.Add64(lo, 1, 0)
	if hi != 0 || carry != 0 {
		return math.MaxUint64
	}
	return lo
}

func satAdd(a, b uint64) uint64 {
	if s, c := bits.Add64(a, b, 0); c == 0 {
		return s
	}
	return math.MaxUint64
}

// toInt64 caps a count for the int64 status fields of Subnet and IPPool.
func toInt64(n uint64) int64 {
	if n > math.MaxInt64 {
		return math.MaxInt64
	}
	return int64(n)
}

// addrSet builds a normalized set from single addresses (sorted here, any order in).
func addrSet(addrs []netip.Addr) rangeSet {
	slices.SortFunc(addrs, netip.Addr.Compare)
	var out rangeSet
	for _, a := range addrs {
		if n := len(out); n > 0 && (out[n-1].Last == a || out[n-1].Last.Next() == a) {
			out[n-1].Last = a
			continue
		}
		out = append(out, Range{First: a, Last: a})
	}
	return out
}

func maxAddr(a, b netip.Addr) netip.Addr {
	if a.Compare(b) >= 0 {
		return a
	}
	return b
}

func minAddr(a, b netip.Addr) netip.Addr {
	if a.Compare(b) <= 0 {
		return a
	}
	return b
}
