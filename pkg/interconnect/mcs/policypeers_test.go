package mcs

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/kovn/kovn/pkg/ovn"
	"github.com/kovn/kovn/pkg/ovn/model/clusterset"
)

// TestPolicyPeers: c1 publishes namespace x; c2's peer view sees its pods with their
// addresses and labels, follows a pod leaving, tells its subscribers which namespace changed,
// keeps the last view while the store is away (and says so), and forgets c1's pods when c1
// unpublishes x or leaves the set. A sync that changes nothing writes nothing.
func TestPolicyPeers(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c1, c2 := twoClusters(ctx, t)
	for s, az := range map[*Store]string{c1: "az1", c2: "az2"} {
		if _, err := s.RegisterCluster(ctx, az); err != nil {
			t.Fatal(err)
		}
	}
	set := &Clusterset{member: true, decided: true, db: c2.DB, store: c2, live: ovn.WatchLiveness(ctx, c2.DB, 0)}
	set.watch(c2.DB)
	view := set.Peers()
	var mu sync.Mutex
	var heard []string
	view.Subscribe(func(ns string) { mu.Lock(); heard = append(heard, ns); mu.Unlock() })

	x := &PolicyNamespace{Name: "x", Labels: map[string]string{"kubernetes.io/metadata.name": "x", "team": "blue"}}
	a := PolicyPod{Namespace: "x", Name: "a", Labels: map[string]string{"pod": "a"}, Addresses: []string{"fd00:10:16::5", "10.16.0.5"}}
	b := PolicyPod{Namespace: "x", Name: "b", Labels: map[string]string{"pod": "b"}, Addresses: []string{"10.16.0.6"}}
	if wrote, err := c1.SyncPolicyNamespace(ctx, "x", x, []PolicyPod{a, b}); err != nil || !wrote {
		t.Fatalf("publishing x: wrote %v, %v", wrote, err)
	}
	if wrote, err := c1.SyncPolicyNamespace(ctx, "x", x, []PolicyPod{b, a}); err != nil || wrote {
		t.Fatalf("publishing x again: wrote %v, %v; want nothing written", wrote, err)
	}
	pods := func() string {
		var out []string
		for _, p := range view.Pods("c1", "x") {
			out = append(out, fmt.Sprintf("%s%v%v", p.Name, p.Labels, p.IPs))
		}
		return fmt.Sprint(out)
	}
	eventually(t, "c2 sees x's pods", func() error {
		want := "[amap[pod:a][10.16.0.5 fd00:10:16::5] bmap[pod:b][10.16.0.6]]"
		if got := pods(); got != want {
			return fmt.Errorf("pods %s, want %s", got, want)
		}
		if nss := view.Namespaces(); len(nss) != 1 || nss[0].Cluster != "c1" || nss[0].Labels["team"] != "blue" {
			return fmt.Errorf("namespaces %+v, want c1's x", nss)
		}
		return nil
	})
	if !view.Ready() {
		t.Error("the view was read: not ready")
	}
	if (&Clusterset{}).Peers().Ready() {
		t.Error("a view before the membership was decided is ready: a new leader would drop every clusterset peer")
	}
	if !(&Clusterset{decided: true}).Peers().Ready() {
		t.Error("no clusterset (decided): not ready")
	}
	if view.Local() != "c2" || !slices.Equal(view.Clusters(), []string{"c1", "c2"}) {
		t.Errorf("local %q, clusters %v", view.Local(), view.Clusters())
	}
	mu.Lock()
	if !slices.Contains(heard, "x") {
		t.Errorf("subscribers heard %q, want x", heard)
	}
	mu.Unlock()

	if _, err := c1.SyncPolicyNamespace(ctx, "x", x, []PolicyPod{a}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "b leaves c2's view", func() error {
		if got := view.Pods("c1", "x"); len(got) != 1 || got[0].Name != "a" || !slices.Equal(got[0].IPs, []netip.Addr{netip.MustParseAddr("10.16.0.5"), netip.MustParseAddr("fd00:10:16::5")}) {
			return fmt.Errorf("pods %+v, want a only", got)
		}
		return nil
	})

	// The store away: the last view stays, and says since when.
	set.mu.Lock()
	set.store = nil
	set.mu.Unlock()
	view.changed("x")
	if got := view.Pods("c1", "x"); len(got) != 1 {
		t.Errorf("store away: pods %+v, want the last view (a)", got)
	}
	if current, since := view.Current(); current || since.IsZero() {
		t.Errorf("store away: current %v since %v, want stale", current, since)
	}
	set.mu.Lock()
	set.store = c2
	set.mu.Unlock()
	view.changed("") // as the store's liveness turning tells it
	if current, _ := view.Current(); !current {
		t.Error("store back: the view is still stale")
	}

	if _, err := c1.SyncPolicyNamespace(ctx, "x", nil, []PolicyPod{a}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "x unpublished", func() error {
		var rows []clusterset.PolicyPod
		if err := c2.DB.List(ctx, &rows); err != nil || len(rows) != 0 || len(view.Pods("c1", "x")) != 0 || len(view.Namespaces()) != 0 {
			return fmt.Errorf("rows %+v (%v), view %+v", rows, err, view.Namespaces())
		}
		return nil
	})
	if _, err := c1.SyncPolicyNamespace(ctx, "x", x, []PolicyPod{a, b}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "x back", func() error {
		if len(view.Pods("c1", "x")) != 2 {
			return fmt.Errorf("pods %+v", view.Pods("c1", "x"))
		}
		return nil
	})
	if err := c1.ForgetCluster(ctx, "c1"); err != nil {
		t.Fatal(err)
	}
	eventually(t, "c1 left: its pods with it", func() error {
		var pods []clusterset.PolicyPod
		var nss []clusterset.PolicyNamespace
		if err := c2.DB.List(ctx, &pods); err != nil || len(pods) != 0 {
			return fmt.Errorf("pods %+v (%v)", pods, err)
		}
		if err := c2.DB.List(ctx, &nss); err != nil || len(nss) != 0 || len(view.Namespaces()) != 0 {
			return fmt.Errorf("namespaces %+v (%v)", nss, err)
		}
		return nil
	})
}
