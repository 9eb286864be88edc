package nbsync

import (
	"k8s.io/utils/ptr"

	"github.com/kovn/kovn/pkg/cluster/topology"
	"github.com/kovn/kovn/pkg/ovn"
	"github.com/kovn/kovn/pkg/ovn/model/nb"
)

// natKey identifies a NAT row of a shard: its router, type and addresses.
func natKey(router, typ, external, logical string) string {
	return router + "|" + typ + "|" + external + "|" + logical
}

// syncNATs makes the shard's NAT rows match: keyed on router, type and addresses, the
// gateway port updated in place, rows joining and leaving Logical_Router.nat by mutation. A
// gateway port that does not exist (its subnet not programmed yet) is missing, like a parent.
func (t *tx) syncNATs() {
	want := map[string]int{}
	for i, n := range t.sh.NATs {
		want[natKey(n.Router, n.Type, n.ExternalIP.String(), n.LogicalIP.String())] = i
	}
	done := map[string]bool{}
	for _, cur := range findOwned(t, &nb.NAT{ExternalIDs: ownerProbe(t.sh)}) {
		k := natKey(cur.ExternalIDs[ovn.ParentKey], cur.Type, cur.ExternalIP, cur.LogicalIP)
		i, ok := want[k]
		if !ok || done[k] {
			detach(t, t.parentRouter(cur.ExternalIDs, routerNATs, cur.UUID), routerNATs, cur.UUID)
			t.delete(cur)
			continue
		}
		done[k] = true
		n := t.sh.NATs[i]
		gw, ok := t.gatewayPort(n)
		if !ok {
			continue
		}
		m := natRow(n, gw, t.ids(nil, n.Router))
		if ptr.Deref(cur.GatewayPort, "") != ptr.Deref(m.GatewayPort, "") || ptr.Deref(cur.LogicalPort, "") != ptr.Deref(m.LogicalPort, "") ||
			ptr.Deref(cur.ExternalMAC, "") != ptr.Deref(m.ExternalMAC, "") {
			m.UUID = cur.UUID
			t.update(&m, &m.GatewayPort, &m.LogicalPort, &m.ExternalMAC)
		}
	}
	for _, n := range t.sh.NATs {
		if done[natKey(n.Router, n.Type, n.ExternalIP.String(), n.LogicalIP.String())] {
			continue
		}
		lr, isNew := t.router(n.Router)
		if lr == nil {
			t.missing = append(t.missing, "router "+n.Router)
			continue
		}
		gw, ok := t.gatewayPort(n)
		if !ok {
			continue
		}
		m := natRow(n, gw, t.ids(nil, n.Router))
		attach(t, "router "+n.Router, lr, isNew, routerNATs, t.create(&m, func(id string) { m.UUID = id }))
	}
}

// natRow is n as a NAT row, gw its gateway port's UUID ("" for none).
func natRow(n topology.NAT, gw string, ids map[string]string) nb.NAT {
	m := nb.NAT{Type: n.Type, ExternalIP: n.ExternalIP.String(), LogicalIP: n.LogicalIP.String(), ExternalIDs: ids}
	if gw != "" {
		m.GatewayPort = &gw
	}
	if n.LogicalPort != "" {
		m.LogicalPort, m.ExternalMAC = &n.LogicalPort, &n.ExternalMAC
	}
	return m
}

// gatewayPort is the UUID of n's gateway port ("" when it names none); false, with the port
// recorded as missing, when it does not exist.
func (t *tx) gatewayPort(n topology.NAT) (string, bool) {
	if n.GatewayPort == "" {
		return "", true
	}
	if lrp := byName(t, &nb.LogicalRouterPort{Name: n.GatewayPort}); lrp != nil {
		return lrp.UUID, true
	}
	t.missing = append(t.missing, "router port "+n.GatewayPort)
	return "", false
}

// syncStaticMACBindings makes the static MAC bindings of the shard's router ports match. A
// binding row has no external_ids: those of a port the shard owns (now, or before this
// transaction) are the shard's.
func (t *tx) syncStaticMACBindings() {
	if t.sh.OwnerType == topology.OwnerPod {
		return // a pod never owns a router port: no cache scan on every pod event
	}
	ports := map[string]bool{}
	for _, rp := range findOwned(t, &nb.LogicalRouterPort{ExternalIDs: ownerProbe(t.sh)}) {
		ports[rp.Name] = true
	}
	for _, rp := range t.sh.RouterPorts {
		ports[rp.Name] = true
	}
	if len(ports) == 0 {
		return
	}
	key := func(port, ip, mac string) string { return port + "|" + ip + "|" + mac }
	want := map[string]bool{}
	for _, b := range t.sh.StaticMACBindings {
		want[key(b.Port, b.IP.String(), b.MAC)] = true
	}
	var rows []*nb.StaticMACBinding
	if err := t.c.WhereCache(func(b *nb.StaticMACBinding) bool { return ports[b.LogicalPort] }).List(t.ctx, &rows); err != nil {
		t.add(nil, err)
		return
	}
	done := map[string]bool{}
	for _, cur := range rows {
		k := key(cur.LogicalPort, cur.IP, cur.MAC)
		if !want[k] || done[k] {
			t.delete(cur)
			continue
		}
		done[k] = true
	}
	for _, b := range t.sh.StaticMACBindings {
		if done[key(b.Port, b.IP.String(), b.MAC)] {
			continue
		}
		m := nb.StaticMACBinding{LogicalPort: b.Port, IP: b.IP.String(), MAC: b.MAC, OverrideDynamicMAC: true}
		t.create(&m, func(id string) { m.UUID = id })
	}
}
