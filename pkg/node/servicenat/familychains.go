package servicenat

import (
	"errors"
	"sync"
)

// familyChains applies a reconciler's per-family state (iptables chains, an ipset's members) for
// both families, each only when its rendered text differs from what was last applied
// successfully: an unchanged cluster costs no call, and a family that failed is applied again
// on the next pass.
type familyChains struct {
	mu   sync.Mutex
	last map[bool]string
}

// sync renders each family's rules and applies those that changed.
func (f *familyChains) sync(render func(is4 bool) string, apply func(is4 bool, rules string) error) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.last == nil {
		f.last = map[bool]string{}
	}
	var errs []error
	for _, is4 := range []bool{true, false} {
		rules := render(is4)
		if rules == f.last[is4] {
			continue
		}
		if err := apply(is4, rules); err != nil {
			errs = append(errs, err)
			continue
		}
		f.last[is4] = rules
	}
	return errors.Join(errs...)
}
