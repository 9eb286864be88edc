package interconnect

import (
	"context"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	kovnv1 "github.com/kovn/kovn/api/v1alpha1"
	"github.com/kovn/kovn/pkg/cluster/topology"
)

func foreignInput() ForeignIn {
	return ForeignIn{Name: "openstack", AZ: "openstack", VpcRouter: "ovn-cluster", TransitSwitch: "ts-openstack",
		TransitAddrs: pfx("169.254.60.1/24"), LinkIndex: 1,
		Advertise: pfx("10.16.0.0/16", "fd00:10:16::/64"), Accept: pfx("10.250.1.0/24", "10.250.9.0/24"),
		VpcCIDRs: pfx("10.16.0.0/16", "fd00:10:16::/64"),
		// One agreed prefix, one outside the agreement, one inside a local subnet, and one the
		// clusterset (az2) advertises too.
		Remote: pfx("10.250.2.0/24", "10.250.1.0/24", "10.16.5.0/24", "10.17.0.0/16")}
}

// TestForForeignTopology: a peering router linked to the Vpc's router, with a transit port on
// the foreign transit switch bound to the interconnect's gateways; the agreed local prefixes
// are its static routes (what ovn-ic advertises there), and the Vpc's router reaches the
// learned prefixes through reroute policies, never static routes (ovn-ic would advertise
// those to the clusterset).
func TestForForeignTopology(t *testing.T) {
	in := baseInput()
	in.Foreign = []ForeignIn{foreignInput()}
	d := For(in)
	if len(d.Foreign) != 1 {
		t.Fatalf("%d foreign shards", len(d.Foreign))
	}
	sh := d.Foreign[0].Shard
	if sh.OwnerType != topology.OwnerForeignAZ || sh.Owner != "openstack" || len(sh.Routers) != 1 || sh.Routers[0].Name != "kovn-faz-openstack" {
		t.Errorf("shard owner/routers: %s/%s %+v", sh.OwnerType, sh.Owner, sh.Routers)
	}
	ports := map[string]topology.RouterPort{}
	for _, rp := range sh.RouterPorts {
		ports[rp.Name] = rp
	}
	tp := ports["az1-ts-openstack"]
	if tp.Router != "kovn-faz-openstack" || !slices.Equal(tp.Networks, []string{"169.254.60.1/24"}) ||
		!slices.Equal(tp.GatewayChassis, []topology.GatewayChassis{{Chassis: "n1", Priority: 100}, {Chassis: "n2", Priority: 99}}) {
		t.Errorf("transit port %+v", tp)
	}
	if vp := ports["kovn-faz-openstack-vpc"]; vp.Router != "ovn-cluster" || !slices.Equal(vp.Networks, []string{"169.254.99.5/30"}) {
		t.Errorf("Vpc router's link port %+v", vp)
	}
	if pp := ports["kovn-faz-openstack-peer"]; pp.Router != "kovn-faz-openstack" || !slices.Equal(pp.Networks, []string{"169.254.99.6/30"}) {
		t.Errorf("peering router's link port %+v", pp)
	}
	if !slices.ContainsFunc(sh.SwitchPorts, func(sp topology.SwitchPort) bool {
		return sp.Switch == "ts-openstack" && sp.Name == "ts-openstack-az1" && sp.Type == "router" && sp.Options["router-port"] == "az1-ts-openstack"
	}) {
		t.Errorf("no switch port on ts-openstack: %+v", sh.SwitchPorts)
	}
	wantRoutes := []topology.StaticRoute{{Router: "kovn-faz-openstack", Prefix: "10.16.0.0/16", Nexthop: "169.254.99.5"}}
	if !slices.Equal(sh.Routes, wantRoutes) {
		t.Errorf("routes %+v, want %+v (no static route on the Vpc's router)", sh.Routes, wantRoutes)
	}
	wantPolicies := []topology.Policy{{Router: "ovn-cluster", Priority: topology.PriorityForeignAZ, Action: "reroute",
		Match: "ip4.dst == 10.250.1.0/24", Nexthops: []string{"169.254.99.6"}}}
	if len(sh.Policies) != 1 || sh.Policies[0].Match != wantPolicies[0].Match || sh.Policies[0].Action != "reroute" ||
		sh.Policies[0].Priority != topology.PriorityForeignAZ || !slices.Equal(sh.Policies[0].Nexthops, wantPolicies[0].Nexthops) {
		t.Errorf("policies %+v, want %+v", sh.Policies, wantPolicies)
	}
	// The clusterset's own shard is untouched by the peering: no port or route of it.
	for _, rp := range d.Shard.RouterPorts {
		if strings.Contains(rp.Name, "openstack") {
			t.Errorf("clusterset shard has %s", rp.Name)
		}
	}
}

// TestForForeignAgreement: what is learned, refused, blacklisted and reported.
func TestForForeignAgreement(t *testing.T) {
	in := baseInput()
	in.Foreign = []ForeignIn{foreignInput()}
	d := For(in)
	fd := d.Foreign[0]
	check := func(what string, got []netip.Prefix, want ...string) {
		t.Helper()
		if !slices.Equal(prefixStrings(got), want) && !(len(got) == 0 && len(want) == 0) {
			t.Errorf("%s = %v, want %v", what, got, want)
		}
	}
	check("Advertised", fd.Advertised, "10.16.0.0/16")
	check("NotAdvertised (no IPv6 on the transit network)", fd.NotAdvertised, "fd00:10:16::/64")
	check("Learned", fd.Learned, "10.250.1.0/24")
	check("Refused", fd.Refused, "10.16.5.0/24", "10.17.0.0/16", "10.250.2.0/24")
	check("Deny", fd.Deny, "10.250.2.0/24")
	check("Unblocked", fd.Unblocked, "10.16.5.0/24", "10.17.0.0/16")
	check("Unadvertised", fd.Unadvertised, "10.250.9.0/24")
	check("Overlapping", fd.Overlapping, "10.16.5.0/24")

	bl := strings.Split(d.Options["ic-route-blacklist"], ",")
	for _, want := range []string{"10.250.2.0/24", "fd00:a9fe:63::/112"} {
		if !slices.Contains(bl, want) {
			t.Errorf("blacklist %v lacks %s", bl, want)
		}
	}
	for _, never := range []string{"10.16.5.0/24", "10.17.0.0/16", "10.250.1.0/24", "10.16.0.0/16"} {
		if slices.Contains(bl, never) {
			t.Errorf("blacklist %v has %s", bl, never)
		}
	}
	// The clusterset still learns az2's prefix the foreign AZ also advertises.
	if !slices.Contains(d.Learned["az2"], netip.MustParsePrefix("10.17.0.0/16")) {
		t.Errorf("clusterset learned %v", d.Learned)
	}

	// A local prefix the InterConnect refuses is not advertised to the foreign AZ either
	// (the blacklist is per AZ), and is reported.
	in.RefuseCIDRs = pfx("10.16.0.0/16")
	fd = For(in).Foreign[0]
	check("Advertised with the prefix refused", fd.Advertised)
	check("NotAdvertised with the prefix refused", fd.NotAdvertised, "10.16.0.0/16", "fd00:10:16::/64")
	if len(fd.Shard.Routes) != 0 {
		t.Errorf("routes %+v for a refused prefix", fd.Shard.Routes)
	}
}

// TestForWithoutForeign: no ForeignAZ, no link network in the blacklist and no foreign shard.
func TestForWithoutForeign(t *testing.T) {
	d := For(baseInput())
	if len(d.Foreign) != 0 || strings.Contains(d.Options["ic-route-blacklist"], "fd00:a9fe:63::") {
		t.Errorf("foreign %d, blacklist %s", len(d.Foreign), d.Options["ic-route-blacklist"])
	}
}

func TestForeignLinkAddrs(t *testing.T) {
	vpc, peer := ForeignLinkAddrs(2, true, true)
	if got := prefixStrings(append(vpc, peer...)); !slices.Equal(got, []string{"169.254.99.9/30", "fd00:a9fe:63::9/126", "169.254.99.10/30", "fd00:a9fe:63::a/126"}) {
		t.Errorf("link 2: %v", got)
	}
	vpc, _ = ForeignLinkAddrs(MaxForeignLinks, true, false)
	if !ForeignLinkCIDR4.Contains(vpc[0].Addr()) {
		t.Errorf("link %d outside %s: %s", MaxForeignLinks, ForeignLinkCIDR4, vpc[0])
	}
}

// A refused IPv6 prefix no longer than the local IPv6 subnets cannot be blacklisted (OVN 23.03
// ignores an IPv6 entry's address): it is reported as learned onto the peering router, not
// as denied, and the blacklist does not carry it.
func TestForForeignIPv6Refused(t *testing.T) {
	in := baseInput()
	f := foreignInput()
	f.TransitAddrs = pfx("169.254.60.1/24", "fd00:a9fe:3c::1/64")
	f.Remote = pfx("10.250.1.0/24", "fd00:250:2::/64", "fd00:250:3::/120")
	in.Foreign = []ForeignIn{f}
	d := For(in)
	fd := d.Foreign[0]
	if got := prefixStrings(fd.Deny); !slices.Equal(got, []string{"fd00:250:3::/120"}) {
		t.Errorf("Deny = %v, want the /120 only (longer than every local IPv6 subnet)", got)
	}
	if got := prefixStrings(fd.IPv6Unblocked); !slices.Equal(got, []string{"fd00:250:2::/64"}) || len(fd.Unblocked) != 0 {
		t.Errorf("IPv6Unblocked = %v, Unblocked %v: want the /64 as IPv6Unblocked only", got, fd.Unblocked)
	}
	bl := d.Options["ic-route-blacklist"]
	if strings.Contains(bl, "fd00:250:2::/64") || !strings.Contains(bl, "fd00:250:3::/120") {
		t.Errorf("blacklist %s", bl)
	}
	// The IPv6 link network: the Vpc's router reaches the peering router over it.
	if got := prefixStrings(fd.Advertised); !slices.Equal(got, []string{"10.16.0.0/16", "fd00:10:16::/64"}) {
		t.Errorf("Advertised = %v with an IPv6 transit address", got)
	}
}

// The RoutesAgreed message names each prefix with its reason.
func TestForeignAgreementMessage(t *testing.T) {
	in := baseInput()
	f := foreignInput()
	f.TransitAddrs = pfx("169.254.60.1/24", "fd00:a9fe:3c::1/64")
	f.Remote = append(f.Remote, pfx("fd00:250:2::/64")...)
	in.Foreign = []ForeignIn{f}
	fd := For(in).Foreign[0]
	o := &kovnv1.ForeignAZ{}
	(&Reconciler{}).agreement(o, f, fd)
	c := meta.FindStatusCondition(o.Status.Conditions, kovnv1.ConditionRoutesAgreed)
	if c == nil || c.Status != metav1.ConditionFalse || c.Reason != kovnv1.ReasonRouteMismatch {
		t.Fatalf("condition %+v", c)
	}
	for _, want := range []string{
		"advertises [10.17.0.0/16 10.250.2.0/24 fd00:250:2::/64] outside acceptCIDRs",
		"advertises [10.16.5.0/24] inside this Vpc's subnets",
		"ovn-ic still learns [fd00:250:2::/64] onto the peering router, where nothing routes to it: OVN 23.03 cannot blacklist",
		"ovn-ic still learns [10.16.5.0/24 10.17.0.0/16] onto the peering router, where nothing routes to it: blacklisting it would also withdraw",
		"accepted [10.250.9.0/24] but AZ openstack advertises nothing inside",
	} {
		if !strings.Contains(c.Message, want) {
			t.Errorf("message %q lacks %q", c.Message, want)
		}
	}
	// Exactly the agreement: True.
	f.Remote, f.Accept, f.Advertise = pfx("10.250.1.0/24"), pfx("10.250.1.0/24"), pfx("10.16.0.0/16")
	in.Foreign = []ForeignIn{f}
	(&Reconciler{}).agreement(o, f, For(in).Foreign[0])
	if c := meta.FindStatusCondition(o.Status.Conditions, kovnv1.ConditionRoutesAgreed); c.Status != metav1.ConditionTrue {
		t.Errorf("agreed routes: %+v", c)
	}
}

// A reconcile that changes nothing of a ForeignAZ's status writes nothing: the interconnect
// reconciles on every IC-SB change.
func TestForeignStatusPatchedOnlyOnChange(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := kovnv1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	obj := &kovnv1.ForeignAZ{ObjectMeta: metav1.ObjectMeta{Name: "openstack"}, Spec: kovnv1.ForeignAZSpec{AZ: "openstack"}}
	patches := 0
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(obj).WithStatusSubresource(obj).
		WithInterceptorFuncs(interceptor.Funcs{SubResourcePatch: func(ctx context.Context, c client.Client, sub string, o client.Object, p client.Patch, opts ...client.SubResourcePatchOption) error {
			patches++
			return c.SubResource(sub).Patch(ctx, o, p, opts...)
		}}).Build()
	r := &Reconciler{Client: c}
	in := baseInput()
	f := foreignInput()
	in.Foreign = []ForeignIn{f}
	fd := For(in).Foreign[0]
	cs := clusterset{portGateway: map[string]string{SwitchPortName("az1", "ts-openstack"): "n1"}}
	ctx := context.Background()
	for i := 0; i < 3; i++ {
		var cur kovnv1.ForeignAZ
		if err := c.Get(ctx, client.ObjectKey{Name: "openstack"}, &cur); err != nil {
			t.Fatal(err)
		}
		if _, err := r.foreignStatus(ctx, in, foreignPeering{obj: &cur, in: f, good: true}, fd, cs, nil); err != nil {
			t.Fatal(err)
		}
	}
	if patches != 1 {
		t.Errorf("%d status patches over 3 identical reconciles, want 1", patches)
	}
	var got kovnv1.ForeignAZ
	_ = c.Get(ctx, client.ObjectKey{Name: "openstack"}, &got)
	if !slices.Equal(got.Status.Learned, []string{"10.250.1.0/24"}) || meta.FindStatusCondition(got.Status.Conditions, kovnv1.ConditionReady).Status != metav1.ConditionTrue {
		t.Errorf("status %+v", got.Status)
	}
}
