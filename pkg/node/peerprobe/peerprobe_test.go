package peerprobe

import (
	"context"
	"net/netip"
	"slices"
	"testing"
	"time"

	libovsdb "github.com/ovn-org/libovsdb/client"

	"github.com/kovn/kovn/pkg/ovn"
	"github.com/kovn/kovn/pkg/ovn/model/vswitch"
	"github.com/kovn/kovn/pkg/ovn/ovntest"
)

// probeNames are the names of Bridge's probe ports, sorted; nil when there is no bridge.
func probeNames(ctx context.Context, t *testing.T, c libovsdb.Client) []string {
	t.Helper()
	br, err := ovn.Get(ctx, c, &vswitch.Bridge{Name: Bridge})
	if err != nil {
		return nil
	}
	names := []string{}
	for _, uuid := range br.Ports {
		if p, err := ovn.Get(ctx, c, &vswitch.Port{UUID: uuid}); err == nil && p.Name != Bridge {
			names = append(names, p.Name)
		}
	}
	slices.Sort(names)
	return names
}

func waitNames(ctx context.Context, t *testing.T, c libovsdb.Client, want []string) {
	t.Helper()
	for !slices.Equal(probeNames(ctx, t, c), want) {
		if ctx.Err() != nil {
			t.Fatalf("probe ports %v, want %v", probeNames(ctx, t, c), want)
		}
		time.Sleep(5 * time.Millisecond) // the cache follows the server's update
	}
}

// The probe bridge holds a Geneve port on 6082 with BFD per peer gateway, made with the
// bridge, added and removed as the peers change, and goes with the last peer.
func TestSyncTunnels(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, _ := ovntest.ServeOVS(t, "br-int", nil)
	a, b, d := netip.MustParseAddr("172.30.2.11"), netip.MustParseAddr("172.30.2.12"), netip.MustParseAddr("fd00:30::3:11")
	sync := func(peers map[string][]netip.Addr) {
		t.Helper()
		if err := syncTunnels(ctx, c, wanted(peers), "netdev"); err != nil {
			t.Fatal(err)
		}
	}
	sync(map[string][]netip.Addr{"az2": {a, b}})
	want := []string{portName(a), portName(b)}
	slices.Sort(want)
	waitNames(ctx, t, c, want)
	br, _ := ovn.Get(ctx, c, &vswitch.Bridge{Name: Bridge})
	if br.DatapathType != "netdev" {
		t.Errorf("bridge datapath %q, want br-int's", br.DatapathType)
	}
	i, err := ovn.Get(ctx, c, &vswitch.Interface{Name: portName(a)})
	if err != nil || i.Type != "geneve" || i.Options["remote_ip"] != "172.30.2.11" || i.Options["dst_port"] != "6082" ||
		i.BFD["enable"] != "true" || i.BFD["min_tx"] != "100" || i.BFD["mult"] != "3" || i.ExternalIDs[ovn.OwnerKey] != "az2" {
		t.Fatalf("interface %+v, %v", i, err)
	}
	if len(portName(d)) > 15 {
		t.Errorf("port name %q longer than a kernel link name", portName(d))
	}
	sync(map[string][]netip.Addr{"az2": {b}, "az3": {d}})
	want = []string{portName(b), portName(d)}
	slices.Sort(want)
	waitNames(ctx, t, c, want)
	sync(nil)
	waitNames(ctx, t, c, nil)
}

// An AZ is reported down once every session toward it is not up, after one was up; never
// before, and not once it is no peer any more.
func TestDown(t *testing.T) {
	r := &Reconciler{}
	peers := map[string][]netip.Addr{"az2": nil, "az3": nil}
	if got := r.down(peers, map[string][]string{"az2": {"down", "down"}, "az3": {"init"}}); len(got) != 0 {
		t.Fatalf("never up: down %v", got)
	}
	if got := r.down(peers, map[string][]string{"az2": {"up", "down"}, "az3": {"up"}}); len(got) != 0 {
		t.Fatalf("one session up each: down %v", got)
	}
	if got := r.down(peers, map[string][]string{"az2": {"down", "init"}, "az3": {"up"}}); !slices.Equal(got, []string{"az2"}) {
		t.Fatalf("az2's sessions lost: down %v, want [az2]", got)
	}
	if got := r.down(map[string][]netip.Addr{"az3": nil}, map[string][]string{"az2": {"down"}, "az3": {"up"}}); len(got) != 0 {
		t.Fatalf("az2 no longer a peer: down %v", got)
	}
	if got := r.down(peers, map[string][]string{"az2": {"down"}, "az3": {"up"}}); len(got) != 0 {
		t.Fatalf("az2 a peer again, not up since: down %v", got)
	}
}
