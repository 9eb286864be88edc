package interconnect

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/kovn/kovn/pkg/annotation"
	"github.com/kovn/kovn/pkg/ovn"
)

// keyCatchUpTimeout bounds the wait for the gateways' ovn-controllers before new transit keys
// are published anyway (a gateway that is down would otherwise hold them back for good).
const keyCatchUpTimeout = 10 * time.Second

// pendingKeys are transit keys seen in NB and not yet published to the gateway nodes: they
// wait until every gateway's ovn-controller has installed NB configuration nbCfg, bumped when
// the keys were first seen.
type pendingKeys struct {
	keys  string
	nbCfg int64
	since time.Time
}

// joinKeys is the annotation value of keys: "port=key" pairs, sorted.
func joinKeys(keys map[string]string) string {
	var pairs []string
	for port, key := range keys {
		pairs = append(pairs, port+"="+key)
	}
	slices.Sort(pairs)
	return strings.Join(pairs, ",")
}

// transitKeysDue says whether the transit keys may be published to the gateways now.
//
// Publishing makes each gateway's kovn-daemon write them into Open_vSwitch, and that makes
// ovn-controller rebuild its physical flows: the rebuild replaces the patch flow that
// ovn-controller 23.03's incremental path leaves with a transit port's old key after ovn-ic
// re-keyed it. The keys are read from NB (ovn-ic's requested-tnl-key), ahead of northd and of
// ovn-controller: published at once, the rebuild could run before ovn-controller had the new
// key and leave the stale flow in place (seen once: a cluster's pods unreachable from one
// peer for minutes). So new keys first bump NB_Global.nb_cfg, and are published once every
// gateway's ovn-controller reports that configuration installed (it then holds the re-key
// too), or after keyCatchUpTimeout, or at once when SB health is unknown.
func (r *Reconciler) transitKeysDue(ctx context.Context, nodes []corev1.Node, gateways []string, keys map[string]string) (bool, error) {
	want := joinKeys(keys)
	if want == "" || annotatedWith(nodes, gateways, want) {
		r.pending = pendingKeys{}
		return true, nil
	}
	if r.pending.keys != want {
		cfg, err := ovn.BumpNbCfg(ctx, r.NB)
		if err != nil {
			return false, fmt.Errorf("transit keys %s: %w", want, err)
		}
		r.pending = pendingKeys{keys: want, nbCfg: cfg, since: time.Now()}
	}
	return keysCaughtUp(gateways, r.pending, time.Now(), r.Health.CaughtUp), nil
}

// keysCaughtUp says whether every gateway's ovn-controller has installed p.nbCfg (a gateway
// whose state is unknown does not hold the keys back), or p has waited keyCatchUpTimeout.
func keysCaughtUp(gateways []string, p pendingKeys, now time.Time, caughtUp func(chassis string, nbCfg int64) (bool, bool)) bool {
	if now.Sub(p.since) >= keyCatchUpTimeout {
		return true
	}
	for _, g := range gateways {
		if ok, known := caughtUp(g, p.nbCfg); known && !ok {
			return false
		}
	}
	return true
}

// annotatedWith says whether every gateway node carries the keys want.
func annotatedWith(nodes []corev1.Node, gateways []string, want string) bool {
	for _, n := range nodes {
		if slices.Contains(gateways, n.Name) && n.Annotations[annotation.ICTransitKeys] != want {
			return false
		}
	}
	return true
}
