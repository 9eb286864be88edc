package underlay

import (
	"context"
	"net/netip"
	"testing"

	libovsdb "github.com/ovn-org/libovsdb/client"

	"github.com/kovn/kovn/pkg/ovn"
	"github.com/kovn/kovn/pkg/ovn/model/vswitch"
	"github.com/kovn/kovn/pkg/ovn/ovntest"
)

// ovsWithIntegration serves an in-memory Open_vSwitch database holding br-int (netdev) and a
// chassis identity, and connects a client.
func ovsWithIntegration(t *testing.T) libovsdb.Client {
	c, _ := ovntest.ServeOVS(t, "br-int", map[string]string{"system-id": "n1", BridgeMappingsKey: "admin:br-admin"})
	return c
}

func rootIDs(t *testing.T, c libovsdb.Client) map[string]string {
	t.Helper()
	root, err := ovn.OpenVSwitchRoot(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	return root.ExternalIDs
}

// A provider bridge is created with br-int's datapath, the NIC's MAC and the NIC's record, is
// found again by ownership, mapped beside an admin's own mapping, and deleted with its ports.
func TestProviderBridgeLifecycle(t *testing.T) {
	ctx := context.Background()
	c := ovsWithIntegration(t)
	dp, err := DatapathType(ctx, c, "br-int")
	if err != nil || dp != "netdev" {
		t.Fatalf("datapath %q %v", dp, err)
	}
	cfg := NICConfig{Addrs: []netip.Prefix{netip.MustParsePrefix("172.29.1.11/16")},
		Routes: []RouteConfig{{Dst: netip.MustParsePrefix("172.28.0.0/16"), Gw: netip.MustParseAddr("172.29.0.254"), Table: 254}}}
	if err := CreateBridge(ctx, c, "phys", "eth1", "0a:00:00:00:00:01", dp, cfg); err != nil {
		t.Fatal(err)
	}
	br, err := ovn.Get(ctx, c, &vswitch.Bridge{Name: "br-phys"})
	if err != nil || br.DatapathType != "netdev" || br.OtherConfig["hwaddr"] != "0a:00:00:00:00:01" || len(br.Ports) != 2 {
		t.Fatalf("bridge %+v %v", br, err)
	}
	bs, err := Bridges(ctx, c)
	if err != nil || len(bs) != 1 || bs[0].Provider != "phys" || bs[0].NIC != "eth1" || !bs[0].HasNICPort ||
		len(bs[0].Config.Routes) != 1 || bs[0].Config.Routes[0].Gw != cfg.Routes[0].Gw {
		t.Fatalf("bridges %+v %v", bs, err)
	}
	if err := SetMappings(ctx, c, []Want{{Provider: "phys", NIC: "eth1"}}, nil); err != nil {
		t.Fatal(err)
	}
	if got := rootIDs(t, c); got[BridgeMappingsKey] != "admin:br-admin,phys:br-phys" || got["system-id"] != "n1" {
		t.Fatalf("external_ids %v", got)
	}
	if err := SetMappings(ctx, c, nil, []string{"phys"}); err != nil {
		t.Fatal(err)
	}
	if got := rootIDs(t, c)[BridgeMappingsKey]; got != "admin:br-admin" {
		t.Fatalf("mappings %q after phys left, want the admin's only", got)
	}
	if err := DeleteBridge(ctx, c, "br-phys"); err != nil {
		t.Fatal(err)
	}
	var ports []vswitch.Port
	if err := c.List(ctx, &ports); err != nil || len(ports) != 0 {
		t.Fatalf("ports left after the bridge went: %+v %v", ports, err)
	}
	if bs, _ := Bridges(ctx, c); len(bs) != 0 {
		t.Fatalf("bridges left %+v", bs)
	}
	if err := DeleteBridge(ctx, c, "br-phys"); err != nil {
		t.Fatalf("second delete: %v", err)
	}
}
