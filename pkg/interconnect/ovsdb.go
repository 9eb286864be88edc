package interconnect

import (
	"context"
	"errors"
	"maps"
	"net/netip"
	"slices"
	"sort"
	"strings"
	"time"

	libovsdb "github.com/ovn-org/libovsdb/client"
	"github.com/ovn-org/libovsdb/model"
	"github.com/ovn-org/libovsdb/ovsdb"

	"github.com/kovn/kovn/pkg/ovn"
	"github.com/kovn/kovn/pkg/ovn/model/icnb"
	"github.com/kovn/kovn/pkg/ovn/model/icsb"
	"github.com/kovn/kovn/pkg/ovn/model/nb"
)

// ownedOptions are the NB_Global options the interconnect writes; every other key (northd's,
// an operator's) is left alone.
var ownedOptions = []string{"ic-route-adv", "ic-route-learn", "ic-route-blacklist", "bfd-min-rx", "bfd-min-tx", "bfd-mult"}

// applyNBGlobal sets the AZ name (ovn-ic registers the AZ under it) and the owned options;
// az "" and nil options take the cluster out: name cleared, options removed. No transaction
// when nothing changes.
func applyNBGlobal(ctx context.Context, c libovsdb.Client, az string, options map[string]string) error {
	want := map[string]string{}
	for _, k := range ownedOptions {
		if v, ok := options[k]; ok {
			want[k] = v
		}
	}
	_, err := ovn.UpdateGlobal(ctx, c, func(m *nb.NBGlobal) ovn.GlobalChange {
		ch := ovn.GlobalChange{Mutations: ovn.MapMutations(&m.Options, m.Options, want, ownedOptions)}
		if m.Name != az {
			m.Name = az
			ch.Updates = []interface{}{&m.Name}
		}
		return ch
	})
	return err
}

// ensureTransitSwitch creates the transit switch in IC-NB if no cluster has yet. It is shared
// by every cluster of the set, so no cluster ever deletes it.
func ensureTransitSwitch(ctx context.Context, c libovsdb.Client, name string) error {
	ts := &icnb.TransitSwitch{Name: name}
	if err := c.Get(ctx, ts); err == nil {
		return nil
	} else if !errors.Is(err, libovsdb.ErrNotFound) {
		return err
	}
	ts = &icnb.TransitSwitch{Name: name, ExternalIDs: map[string]string{ovn.WriterKey: "interconnect"}}
	ops, err := c.Create(ts)
	if err != nil {
		return err
	}
	_, err = ovn.Transact(ctx, c, ops)
	return err
}

// clusterset is what IC-SB says about the set: AZs, their gateways, routes and transit ports.
type clusterset struct {
	azName   map[string]string // AZ row UUID -> name
	gateways map[string][]string
	routes   map[string][]netip.Prefix
	// portGateway is the chassis binding each transit port (OVN-IC copies it from the AZ's SB).
	portGateway map[string]string
	// portAddrs are the transit addresses each AZ's ports use, by AZ name.
	portAddrs map[string][]netip.Addr
	// tsRoutes are the routes on transit switches not kovn's, by switch and AZ (foreign AZs').
	tsRoutes map[string]map[string][]netip.Prefix
	// members are the clusterset's AZs: those with a port or a route on a kovn transit switch
	// or a join record in IC-NB (a foreign AZ has neither; see withJoined).
	members map[string]bool
	// tunnelAddrs are the tunnel (encap) addresses of each AZ's gateways, by AZ name.
	tunnelAddrs map[string][]netip.Addr
}

// transitSwitches are the transit switches of kovn's naming in IC-NB, the default first.
func transitSwitches(ctx context.Context, c libovsdb.Client) ([]string, error) {
	var all []icnb.TransitSwitch
	if err := c.List(ctx, &all); err != nil {
		return nil, err
	}
	var idx []int
	for _, ts := range all {
		if i, ok := transitSwitchIndex(ts.Name); ok {
			idx = append(idx, i)
		}
	}
	slices.Sort(idx)
	var out []string
	for _, i := range slices.Compact(idx) {
		out = append(out, TransitSwitchName(i))
	}
	return out, nil
}

// readClusterset reads the IC-SB cache: routes and port bindings on kovn's transit switches
// (an AZ advertises the same routes on each), transit addresses on the default one.
func readClusterset(ctx context.Context, c libovsdb.Client) (clusterset, error) {
	cs := clusterset{azName: map[string]string{}, gateways: map[string][]string{}, routes: map[string][]netip.Prefix{},
		portGateway: map[string]string{}, portAddrs: map[string][]netip.Addr{},
		tsRoutes: map[string]map[string][]netip.Prefix{}, members: map[string]bool{}, tunnelAddrs: map[string][]netip.Addr{}}
	var azs []icsb.AvailabilityZone
	if err := c.List(ctx, &azs); err != nil {
		return cs, err
	}
	for _, az := range azs {
		cs.azName[az.UUID] = az.Name
	}
	var gws []icsb.Gateway
	if err := c.List(ctx, &gws); err != nil {
		return cs, err
	}
	var encaps []icsb.Encap
	if err := c.List(ctx, &encaps); err != nil {
		return cs, err
	}
	encapAddr := map[string]netip.Addr{}
	for _, e := range encaps {
		if a, err := netip.ParseAddr(e.IP); err == nil {
			encapAddr[e.UUID] = a
		}
	}
	for _, g := range gws {
		if az, ok := cs.azName[g.AvailabilityZone]; ok {
			cs.gateways[az] = append(cs.gateways[az], g.Name)
			for _, e := range g.Encaps {
				if a, ok := encapAddr[e]; ok {
					cs.tunnelAddrs[az] = append(cs.tunnelAddrs[az], a)
				}
			}
		}
	}
	for _, list := range cs.gateways {
		sort.Strings(list)
	}
	var routes []icsb.Route
	if err := c.List(ctx, &routes); err != nil {
		return cs, err
	}
	for _, r := range routes {
		p, err := netip.ParsePrefix(r.IPPrefix)
		az, ok := cs.azName[r.AvailabilityZone]
		if err != nil || !ok {
			continue
		}
		if _, kovn := transitSwitchIndex(r.TransitSwitch); !kovn {
			if cs.tsRoutes[r.TransitSwitch] == nil {
				cs.tsRoutes[r.TransitSwitch] = map[string][]netip.Prefix{}
			}
			cs.tsRoutes[r.TransitSwitch][az] = append(cs.tsRoutes[r.TransitSwitch][az], p.Masked())
			continue
		}
		cs.routes[az] = append(cs.routes[az], p)
		cs.members[az] = true
	}
	for az, ps := range cs.routes {
		cs.routes[az] = sortedPrefixes(ps)
	}
	var pbs []icsb.PortBinding
	if err := c.List(ctx, &pbs); err != nil {
		return cs, err
	}
	for _, pb := range pbs {
		cs.portGateway[pb.LogicalPort] = pb.Gateway // a ForeignAZ's port too
		if _, kovn := transitSwitchIndex(pb.TransitSwitch); !kovn {
			continue
		}
		if az, ok := cs.azName[pb.AvailabilityZone]; ok {
			cs.members[az] = true
		}
		if pb.TransitSwitch != DefaultTransitSwitch {
			continue
		}
		az := cs.azName[pb.AvailabilityZone]
		for _, f := range strings.Fields(pb.Address) {
			if p, err := netip.ParsePrefix(f); err == nil {
				cs.portAddrs[az] = append(cs.portAddrs[az], p.Addr())
			}
		}
	}
	return cs, nil
}

// withJoined adds the AZs that recorded their join in IC-NB (kovn clusters, bound to a
// transit switch or not yet) to the members.
func (cs clusterset) withJoined(joined map[string]time.Time) clusterset {
	for az := range joined {
		cs.members[az] = true
	}
	return cs
}

// peers returns the clusterset's AZ names other than az, sorted: AZs on kovn's transit
// switches (a foreign AZ, on its own switch only, is none).
func (cs clusterset) peers(az string) []string {
	var out []string
	for _, n := range cs.azName {
		if n != az && cs.members[n] {
			out = append(out, n)
		}
	}
	sort.Strings(out)
	return out
}

// remoteRoutes are the routes of every AZ but az.
func (cs clusterset) remoteRoutes(az string) map[string][]netip.Prefix {
	out := maps.Clone(cs.routes)
	delete(out, az)
	return out
}

// transitIndex keeps the AZ's current transit host number unless another AZ uses it, else
// picks the lowest free one. self are the AZ's names (the old one too while it is renamed).
func (cs clusterset) transitIndex(current int, self ...string) (int, error) {
	used := map[int]bool{}
	for other, addrs := range cs.portAddrs {
		if slices.Contains(self, other) {
			continue
		}
		for _, a := range addrs {
			if TransitCIDR4.Contains(a) {
				used[int(a.As4()[3])] = true
			} else if TransitCIDR6.Contains(a) {
				used[int(a.As16()[15])] = true
			}
		}
	}
	if current > 0 && !used[current] {
		return current, nil
	}
	for i := 1; i < 255; i++ {
		if !used[i] {
			return i, nil
		}
	}
	return 0, errors.New("no free address on the transit networks: 254 AZs use them")
}

// removeAZ deletes an AZ and everything of it from IC-SB (its gateways, routes and transit
// ports), so every other AZ's ovn-ic forgets it: the other clusters' routes to it go.
func removeAZ(ctx context.Context, c libovsdb.Client, az string) error {
	var azs []icsb.AvailabilityZone
	if err := c.WhereCache(func(a *icsb.AvailabilityZone) bool { return a.Name == az }).List(ctx, &azs); err != nil {
		return err
	}
	if len(azs) == 0 {
		return nil
	}
	uuid := azs[0].UUID
	var gws []*icsb.Gateway
	var routes []*icsb.Route
	var pbs []*icsb.PortBinding
	for _, err := range []error{
		c.WhereCache(func(g *icsb.Gateway) bool { return g.AvailabilityZone == uuid }).List(ctx, &gws),
		c.WhereCache(func(r *icsb.Route) bool { return r.AvailabilityZone == uuid }).List(ctx, &routes),
		c.WhereCache(func(p *icsb.PortBinding) bool { return p.AvailabilityZone == uuid }).List(ctx, &pbs),
	} {
		if err != nil && !errors.Is(err, libovsdb.ErrNotFound) {
			return err
		}
	}
	rows := []model.Model{&azs[0]}
	for _, g := range gws {
		rows = append(rows, g)
	}
	for _, r := range routes {
		rows = append(rows, r)
	}
	for _, p := range pbs {
		rows = append(rows, p)
	}
	var ops []ovsdb.Operation
	for _, m := range rows {
		o, err := c.Where(m).Delete()
		if err != nil {
			return err
		}
		ops = append(ops, o...)
	}
	_, err := ovn.Transact(ctx, c, ops)
	return err
}

// updateICNBGlobal commits change of IC_NB_Global; nothing happens while the row does not
// exist yet (recordJoin creates it).
func updateICNBGlobal(ctx context.Context, c libovsdb.Client, change func(m *icnb.ICNBGlobal) ovn.GlobalChange) error {
	if _, err := ovn.UpdateGlobal(ctx, c, change); err != nil && !errors.Is(err, ovn.ErrNoGlobalRow) {
		return err
	}
	return nil
}

// withdrawnKeyPrefix starts the IC_NB_Global external_ids key under which an AZ declares the
// subnets it withdrew for a conflict ("kovn.io/withdrawn/<az>" = comma-separated CIDRs).
const withdrawnKeyPrefix = "kovn.io/withdrawn/"

// subnetsKeyPrefix starts the key under which an AZ declares the subnets it advertises
// ("kovn.io/subnets/<az>" = comma-separated CIDRs): its peers learn its routes only inside them.
const subnetsKeyPrefix = "kovn.io/subnets/"

// withdrawnBy reads every AZ's declaration but az's.
func withdrawnBy(ctx context.Context, c libovsdb.Client, az string) map[string][]netip.Prefix {
	return declarationsBy(ctx, c, withdrawnKeyPrefix, az)
}

// declarationsBy reads every AZ's declaration under keyPrefix but az's.
func declarationsBy(ctx context.Context, c libovsdb.Client, keyPrefix, az string) map[string][]netip.Prefix {
	row, err := ovn.GlobalRow[*icnb.ICNBGlobal](ctx, c)
	if err != nil {
		return nil
	}
	out := map[string][]netip.Prefix{}
	for k, v := range row.ExternalIDs {
		if name, ok := strings.CutPrefix(k, keyPrefix); ok && name != az {
			for _, f := range strings.Split(v, ",") {
				if p, err := netip.ParsePrefix(f); err == nil {
					out[name] = append(out[name], p)
				}
			}
		}
	}
	return out
}

// declare sets az's declaration under keyPrefix to prefixes (none: the key goes), with no
// transaction when it already says so, and returns what it found there.
func declare(ctx context.Context, c libovsdb.Client, keyPrefix, az string, prefixes []netip.Prefix) (string, error) {
	key, want := keyPrefix+az, strings.Join(prefixStrings(prefixes), ",")
	wantIDs := map[string]string{}
	if want != "" {
		wantIDs[key] = want
	}
	row, err := ovn.UpdateGlobal(ctx, c, func(m *icnb.ICNBGlobal) ovn.GlobalChange {
		return ovn.GlobalChange{Mutations: ovn.MapMutations(&m.ExternalIDs, m.ExternalIDs, wantIDs, []string{key})}
	})
	if err != nil && !errors.Is(err, ovn.ErrNoGlobalRow) {
		return "", err
	}
	if err != nil || row == nil {
		return "", nil
	}
	return row.ExternalIDs[key], nil
}
