package cluster

import (
	"context"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"

	kovnv1 "github.com/kovn/kovn/api/v1alpha1"
)

// A subnet on a Vlan is programmed as an underlay switch in the NB database: a localnet port
// with the VLAN's tag and provider, and no router port; the Vlan reports its subnet, and Ready
// follows its ProviderNetwork.
func TestUnderlaySubnetAndVlanStatus(t *testing.T) {
	vlan := &kovnv1.Vlan{ObjectMeta: metav1.ObjectMeta{Name: "v100", Generation: 1}, Spec: kovnv1.VlanSpec{ID: 100, Provider: "phys"}}
	sn := subnetAt("under", "172.28.100.0/24", created0)
	sn.Spec.Vlan = "v100"
	e := defaultEnv(t, vlan, sn)
	e.reconcileSubnet(t, "under")
	p := e.lsp("localnet-under")
	if p == nil || p.Type != "localnet" || p.Tag == nil || *p.Tag != 100 || p.Options["network_name"] != "phys" {
		t.Fatalf("localnet port %+v, want type localnet, tag 100, network_name phys", p)
	}
	if r := e.lsp("under-" + DefaultOptions().DefaultVpc); r != nil {
		t.Fatalf("an underlay subnet got a router port: %+v", r)
	}
	ctx := context.Background()
	vr := &VlanReconciler{Client: e.c}
	status := func() kovnv1.VlanStatus {
		t.Helper()
		if _, err := vr.Reconcile(ctx, ctrl.Request{NamespacedName: types.NamespacedName{Name: "v100"}}); err != nil {
			t.Fatal(err)
		}
		var v kovnv1.Vlan
		if err := e.c.Get(ctx, types.NamespacedName{Name: "v100"}, &v); err != nil {
			t.Fatal(err)
		}
		return v.Status
	}
	st := status()
	if len(st.Subnets) != 1 || st.Subnets[0] != "under" {
		t.Errorf("vlan subnets %v, want [under]", st.Subnets)
	}
	if c := findCondition(st.Conditions, kovnv1.ConditionReady); c == nil || c.Status != metav1.ConditionFalse || c.Reason != kovnv1.ReasonProviderNotFound {
		t.Errorf("Ready %+v without the provider, want False %s", c, kovnv1.ReasonProviderNotFound)
	}
	pn := &kovnv1.ProviderNetwork{ObjectMeta: metav1.ObjectMeta{Name: "phys"}, Spec: kovnv1.ProviderNetworkSpec{DefaultInterface: "eth1"}}
	if err := e.c.Create(ctx, pn); err != nil {
		t.Fatal(err)
	}
	if c := findCondition(status().Conditions, kovnv1.ConditionReady); c == nil || c.Status != metav1.ConditionTrue {
		t.Errorf("Ready %+v with the provider, want True", c)
	}
}
