package crdtest

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kovnv1 "github.com/kovn/kovn/api/v1alpha1"
)

// expect checks the outcome of an API call: want "" means success, otherwise the call must fail
// as Invalid with a message containing want.
func expect(t *testing.T, what string, err error, want string) {
	t.Helper()
	switch {
	case want == "" && err != nil:
		t.Errorf("%s: rejected: %v", what, err)
	case want != "" && err == nil:
		t.Errorf("%s: accepted, want rejection containing %q", what, want)
	case want != "" && !apierrors.IsInvalid(err):
		t.Errorf("%s: want an Invalid error containing %q, got %v", what, want, err)
	case want != "" && !strings.Contains(err.Error(), want):
		t.Errorf("%s: error %q does not contain %q", what, err, want)
	}
}

func meta(name string) metav1.ObjectMeta { return metav1.ObjectMeta{Name: name} }

func TestCRDValidation(t *testing.T) {
	c, cfg := startAPIServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	t.Run("Subnet create", func(t *testing.T) {
		for i, tc := range []struct {
			name string
			spec kovnv1.SubnetSpec
			want string
		}{
			{"minimal", kovnv1.SubnetSpec{CIDRBlock: "10.16.0.0/16"}, ""},
			{"full dual stack centralized", kovnv1.SubnetSpec{CIDRBlock: "10.17.0.0/16,fd00:10:17::/64", Gateway: "10.17.0.1,fd00:10:17::1",
				Protocol: kovnv1.ProtocolDual, ExcludeIPs: []string{"10.17.0.2..10.17.0.9", "fd00:10:17::2"},
				GatewayType: kovnv1.GatewayCentralized, GatewayNodes: []string{"node-a"}, Namespaces: []string{"default"},
				Private: true, AllowSubnets: []string{"10.18.0.0/16"}, NATOutgoing: true}, ""},
			{"bad gatewayType", kovnv1.SubnetSpec{CIDRBlock: "10.16.0.0/16", GatewayType: "everywhere"}, `Unsupported value: "everywhere"`},
			{"centralized without gatewayNodes", kovnv1.SubnetSpec{CIDRBlock: "10.16.0.0/16", GatewayType: kovnv1.GatewayCentralized}, "gatewayNodes is required when gatewayType is centralized"},
			{"empty cidrBlock", kovnv1.SubnetSpec{}, "spec.cidrBlock"},
			{"non-canonical cidr", kovnv1.SubnetSpec{CIDRBlock: "10.16.0.1/16"}, "canonical form"},
			{"upper-case IPv6 cidr", kovnv1.SubnetSpec{CIDRBlock: "FD00::/64"}, "canonical form"},
			{"cidr with space", kovnv1.SubnetSpec{CIDRBlock: "10.16.0.0/16, fd00::/64"}, "canonical form"},
			{"two IPv4 cidrs", kovnv1.SubnetSpec{CIDRBlock: "10.16.0.0/16,10.17.0.0/16"}, "at most one IPv4 and one IPv6"},
			{"three cidrs", kovnv1.SubnetSpec{CIDRBlock: "10.16.0.0/16,fd00::/64,10.17.0.0/16"}, "at most one IPv4 and one IPv6"},
			{"v4 /31", kovnv1.SubnetSpec{CIDRBlock: "10.16.0.0/31"}, "too small"},
			{"protocol mismatch", kovnv1.SubnetSpec{CIDRBlock: "10.16.0.0/16", Protocol: kovnv1.ProtocolIPv6}, "protocol does not match"},
			{"unknown protocol", kovnv1.SubnetSpec{CIDRBlock: "10.16.0.0/16", Protocol: "IPv5"}, `Unsupported value: "IPv5"`},
			{"gateway outside cidr", kovnv1.SubnetSpec{CIDRBlock: "10.16.0.0/16", Gateway: "10.17.0.1"}, "each inside its CIDR"},
			{"gateway malformed", kovnv1.SubnetSpec{CIDRBlock: "10.16.0.0/16", Gateway: "10.16.0.x"}, "comma-separated IP addresses"},
			{"dual stack one gateway", kovnv1.SubnetSpec{CIDRBlock: "10.16.0.0/16,fd00::/64", Gateway: "10.16.0.1"}, "one address per CIDR"},
			{"dual stack two v4 gateways", kovnv1.SubnetSpec{CIDRBlock: "10.16.0.0/16,fd00::/64", Gateway: "10.16.0.1,10.16.0.2"}, "one address per CIDR"},
			{"excludeIps garbage", kovnv1.SubnetSpec{CIDRBlock: "10.16.0.0/16", ExcludeIPs: []string{"10.16.0.0/24"}}, "each excludeIps entry"},
			{"excludeIps mixed range", kovnv1.SubnetSpec{CIDRBlock: "10.16.0.0/16", ExcludeIPs: []string{"10.16.0.1..fd00::1"}}, "each excludeIps entry"},
			{"allowSubnets not cidr", kovnv1.SubnetSpec{CIDRBlock: "10.16.0.0/16", AllowSubnets: []string{"10.17.0.1"}}, "each allowSubnets entry"},
			{"bad namespace", kovnv1.SubnetSpec{CIDRBlock: "10.16.0.0/16", Namespaces: []string{"Default"}}, "spec.namespaces[0]"},
		} {
			s := &kovnv1.Subnet{ObjectMeta: meta("create-" + string(rune('a'+i))), Spec: tc.spec}
			expect(t, tc.name, c.Create(ctx, s), tc.want)
		}
	})

	t.Run("Subnet defaults and immutability", func(t *testing.T) {
		s := &kovnv1.Subnet{ObjectMeta: meta("immutable"), Spec: kovnv1.SubnetSpec{CIDRBlock: "10.20.0.0/16"}}
		if err := c.Create(ctx, s); err != nil {
			t.Fatal(err)
		}
		if s.Spec.Vpc != kovnv1.DefaultVpcName || s.Spec.GatewayType != kovnv1.GatewayDistributed {
			t.Errorf("defaults not applied: vpc=%q gatewayType=%q", s.Spec.Vpc, s.Spec.GatewayType)
		}
		update := func(what string, mutate func(*kovnv1.Subnet), want string) {
			cur := &kovnv1.Subnet{}
			if err := c.Get(ctx, client.ObjectKeyFromObject(s), cur); err != nil {
				t.Fatal(err)
			}
			mutate(cur)
			expect(t, what, c.Update(ctx, cur), want)
		}
		update("change cidrBlock", func(s *kovnv1.Subnet) { s.Spec.CIDRBlock = "10.20.0.0/15" }, "cidrBlock is immutable")
		update("change vpc", func(s *kovnv1.Subnet) { s.Spec.Vpc = "tenant" }, "vpc is immutable")
		update("set logicalSwitch", func(s *kovnv1.Subnet) { s.Spec.LogicalSwitch = "ls" }, "logicalSwitch is immutable")
		update("mutable fields", func(s *kovnv1.Subnet) {
			s.Spec.Gateway = "10.20.0.254"
			s.Spec.ExcludeIPs = []string{"10.20.0.2"}
			s.Spec.Namespaces = []string{"ns1"}
			s.Spec.Protocol = kovnv1.ProtocolIPv4
		}, "")

		cur := &kovnv1.Subnet{}
		if err := c.Get(ctx, client.ObjectKeyFromObject(s), cur); err != nil {
			t.Fatal(err)
		}
		cur.Status = kovnv1.SubnetStatus{ObservedGeneration: cur.Generation, V4AvailableIPs: 65530, V4UsedIPs: 3,
			Protocol: kovnv1.ProtocolIPv4, Gateway: "10.20.0.254",
			Conditions: []metav1.Condition{{Type: kovnv1.ConditionReady, Status: metav1.ConditionTrue, Reason: kovnv1.ReasonReconciled, LastTransitionTime: metav1.Now()}}}
		expect(t, "status update", c.Status().Update(ctx, cur), "")

		// What `kubectl get subnet` shows: the printer columns' JSONPaths must hit real fields
		// (Protocol and Gateway are the effective ones the controller reports in status).
		cells := tableRow(t, cfg, "/apis/kovn.io/v1alpha1/subnets/immutable")
		for col, want := range map[string]any{"VPC": "ovn-cluster", "CIDR": "10.20.0.0/16", "Gateway": "10.20.0.254",
			"Protocol": "IPv4", "V4Used": float64(3), "V4Available": float64(65530), "V6Available": float64(0), "Ready": "True"} {
			if got := cells[col]; got != want {
				t.Errorf("column %s = %v (%T), want %v", col, got, got, want)
			}
		}
	})

	t.Run("IPPool", func(t *testing.T) {
		good := &kovnv1.IPPool{ObjectMeta: meta("pool"), Spec: kovnv1.IPPoolSpec{Subnet: "immutable",
			IPs: []string{"10.20.1.1", "10.20.2.1..10.20.2.9", "10.20.3.0/24", "fd00::1..fd00::9"}}}
		expect(t, "good pool", c.Create(ctx, good), "")
		expect(t, "no ips", c.Create(ctx, &kovnv1.IPPool{ObjectMeta: meta("p2"), Spec: kovnv1.IPPoolSpec{Subnet: "s"}}), "spec.ips")
		expect(t, "bad entry", c.Create(ctx, &kovnv1.IPPool{ObjectMeta: meta("p3"),
			Spec: kovnv1.IPPoolSpec{Subnet: "s", IPs: []string{"10.20.3.1/24"}}}), "each ips entry")
		good.Spec.Subnet = "other"
		expect(t, "change subnet", c.Update(ctx, good), "subnet is immutable")
	})

	t.Run("IP", func(t *testing.T) {
		for i, tc := range []struct {
			name string
			spec kovnv1.IPSpec
			want string
		}{
			{"good", kovnv1.IPSpec{Subnet: "s", PodName: "p", Namespace: "default", NodeName: "n", V4IP: "10.16.0.5", V6IP: "fd00::5", MACAddress: "0a:58:0a:10:00:05"}, ""},
			{"no address", kovnv1.IPSpec{Subnet: "s"}, "at least one of v4IP and v6IP"},
			{"v6 in v4IP", kovnv1.IPSpec{Subnet: "s", V4IP: "fd00::5"}, "v4IP must be an IPv4 address"},
			{"v4 in v6IP", kovnv1.IPSpec{Subnet: "s", V6IP: "10.0.0.1"}, "v6IP must be an IPv6 address"},
			{"upper-case mac", kovnv1.IPSpec{Subnet: "s", V4IP: "10.16.0.6", MACAddress: "0A:58:0A:10:00:05"}, "spec.macAddress"},
			{"attachment", kovnv1.IPSpec{Subnet: "s", PodName: "p", Namespace: "default", V4IP: "10.20.0.5", Network: "default/att", Interface: "net1"}, ""},
			{"network without interface", kovnv1.IPSpec{Subnet: "s", V4IP: "10.20.0.6", Network: "default/att"}, "network and interface go together"},
			{"interface without network", kovnv1.IPSpec{Subnet: "s", V4IP: "10.20.0.7", Interface: "net1"}, "network and interface go together"},
		} {
			expect(t, tc.name, c.Create(ctx, &kovnv1.IP{ObjectMeta: meta("ip-" + string(rune('a'+i))), Spec: tc.spec}), tc.want)
		}
	})

	t.Run("Vpc", func(t *testing.T) {
		for i, tc := range []struct {
			name string
			spec kovnv1.VpcSpec
			want string
		}{
			{"good", kovnv1.VpcSpec{Namespaces: []string{"tenant"},
				StaticRoutes: []kovnv1.StaticRoute{{CIDR: "0.0.0.0/0", NextHopIP: "10.0.0.1"}},
				PolicyRoutes: []kovnv1.PolicyRoute{{Priority: 100, Match: "ip4.src == 10.0.1.0/24", Action: kovnv1.PolicyRouteReroute, NextHopIP: "10.0.0.254"}}}, ""},
			{"reroute without nextHop", kovnv1.VpcSpec{PolicyRoutes: []kovnv1.PolicyRoute{{Priority: 1, Match: "1", Action: kovnv1.PolicyRouteReroute}}}, "nextHopIP is required when action is reroute"},
			{"route family mix", kovnv1.VpcSpec{StaticRoutes: []kovnv1.StaticRoute{{CIDR: "0.0.0.0/0", NextHopIP: "fd00::1"}}}, "same IP family"},
			{"route bad cidr", kovnv1.VpcSpec{StaticRoutes: []kovnv1.StaticRoute{{CIDR: "10.0.0.1/8", NextHopIP: "10.0.0.1"}}}, "cidr must be a CIDR"},
			{"priority too high", kovnv1.VpcSpec{PolicyRoutes: []kovnv1.PolicyRoute{{Priority: 40000, Match: "1", Action: kovnv1.PolicyRouteDrop}}}, "spec.policyRoutes[0].priority"},
		} {
			expect(t, tc.name, c.Create(ctx, &kovnv1.Vpc{ObjectMeta: meta("vpc-" + string(rune('a'+i))), Spec: tc.spec}), tc.want)
		}
	})

	t.Run("ProviderNetwork and Vlan", func(t *testing.T) {
		pn := func(name, nic string) *kovnv1.ProviderNetwork {
			return &kovnv1.ProviderNetwork{ObjectMeta: meta(name), Spec: kovnv1.ProviderNetworkSpec{DefaultInterface: nic}}
		}
		expect(t, "good provider", c.Create(ctx, pn("phys", "eth1")), "")
		expect(t, "name over 12 characters (br-<name> is an interface name)", c.Create(ctx, pn("physical-net1", "eth1")), "at most 12 characters")
		expect(t, "interface name with a slash", c.Create(ctx, pn("p2", "eth/1")), "spec.defaultInterface")
		expect(t, "interface name over 15 characters", c.Create(ctx, pn("p3", "enp0s31f6abcdefgh")), "spec.defaultInterface")
		expect(t, "custom interface without nodes", c.Create(ctx, &kovnv1.ProviderNetwork{ObjectMeta: meta("p4"),
			Spec: kovnv1.ProviderNetworkSpec{DefaultInterface: "eth1", CustomInterfaces: []kovnv1.CustomInterface{{Interface: "ens5"}}}}), "nodes")
		vlan := func(name string, id int32) *kovnv1.Vlan {
			return &kovnv1.Vlan{ObjectMeta: meta(name), Spec: kovnv1.VlanSpec{ID: id, Provider: "phys"}}
		}
		expect(t, "vlan 100", c.Create(ctx, vlan("v100", 100)), "")
		expect(t, "vlan 0 (untagged)", c.Create(ctx, vlan("v0", 0)), "")
		expect(t, "vlan 4095", c.Create(ctx, vlan("v4095", 4095)), "spec.id")
		expect(t, "vlan without provider", c.Create(ctx, &kovnv1.Vlan{ObjectMeta: meta("vx"), Spec: kovnv1.VlanSpec{ID: 5}}), "spec.provider")
		cur := &kovnv1.ProviderNetwork{}
		if err := c.Get(ctx, client.ObjectKey{Name: "phys"}, cur); err != nil {
			t.Fatal(err)
		}
		cur.Status = kovnv1.ProviderNetworkStatus{ReadyNodes: []string{"n1"}, NotReadyNodes: []string{"n3"}}
		expect(t, "status update", c.Status().Update(ctx, cur), "")
		cells := tableRow(t, cfg, "/apis/kovn.io/v1alpha1/providernetworks/phys")
		if cells["Interface"] != "eth1" || cells["Ready"] != `["n1"]` || cells["NotReady"] != `["n3"]` {
			t.Errorf("kubectl get providernetworks columns %v", cells)
		}
	})
}

// tableRow GETs one object as a server-side Table (what kubectl prints) and returns its cells
// by column name.
func tableRow(t *testing.T, cfg *rest.Config, path string) map[string]any {
	t.Helper()
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest(http.MethodGet, cfg.Host+path, nil)
	req.Header.Set("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io")
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var table struct {
		ColumnDefinitions []struct{ Name string } `json:"columnDefinitions"`
		Rows              []struct{ Cells []any } `json:"rows"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&table); err != nil || resp.StatusCode != http.StatusOK || len(table.Rows) != 1 {
		t.Fatalf("GET %s as Table: status %d, %d rows, %v", path, resp.StatusCode, len(table.Rows), err)
	}
	cells := map[string]any{}
	for i, col := range table.ColumnDefinitions {
		if i < len(table.Rows[0].Cells) {
			cells[col.Name] = table.Rows[0].Cells[i]
		}
	}
	return cells
}
