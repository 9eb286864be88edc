package cluster

import (
	"context"
	"net/netip"
	"slices"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"

	kovnv1 "github.com/kovn/kovn/api/v1alpha1"
	"github.com/kovn/kovn/pkg/ipam"
	"github.com/kovn/kovn/pkg/ovn/model/nb"
)

// A Subnet whose addresses are in use is not deleted until they are released.
func TestSubnetDeletionWaitsForAddresses(t *testing.T) {
	e := newReconcilerEnv(t, subnetAt("tenant", "10.30.0.0/24", time.Now()))
	ctx := context.Background()
	e.reconcileSubnet(t, "tenant")
	get := func() (*kovnv1.Subnet, error) {
		var sn kovnv1.Subnet
		err := e.c.Get(ctx, types.NamespacedName{Name: "tenant"}, &sn)
		return &sn, err
	}
	sn, err := get()
	if err != nil || !slices.Contains(sn.Finalizers, SubnetFinalizer) {
		t.Fatalf("finalizer not added: %v %v", sn.Finalizers, err)
	}
	if _, err := e.st.IPAM.Allocate(ipam.Request{Owner: "default/p", Subnet: "tenant"}); err != nil {
		t.Fatal(err)
	}
	if err := e.c.Delete(ctx, sn); err != nil {
		t.Fatal(err)
	}
	e.reconcileSubnet(t, "tenant")
	sn, err = get()
	if err != nil {
		t.Fatalf("subnet gone while an address is held: %v", err)
	}
	if c := meta.FindStatusCondition(sn.Status.Conditions, kovnv1.ConditionReady); c == nil || c.Reason != ReasonInUse {
		t.Fatalf("Ready condition %+v, want reason %s", c, ReasonInUse)
	}
	if _, ok := e.st.Subnet("tenant"); !ok {
		t.Fatal("subnet dropped from the programmed set while in use")
	}
	if !e.hasSwitch("tenant") {
		t.Fatal("the subnet's logical switch was removed from NB while addresses are held")
	}
	e.st.IPAM.Release("default/p")
	e.reconcileSubnet(t, "tenant")
	if _, err := get(); !apierrors.IsNotFound(err) {
		t.Fatalf("subnet still there after its last address was released: %v", err)
	}
	if _, ok := e.st.Subnet("tenant"); ok || e.hasSwitch("tenant") {
		t.Fatal("deleted subnet still programmed")
	}
	if _, err := e.st.IPAM.Allocate(ipam.Request{Owner: "x", Subnet: "tenant", IPs: []netip.Addr{netip.MustParseAddr("10.30.0.9")}}); err == nil {
		t.Fatal("IPAM still allocates from the deleted subnet")
	}
}

func (e *reconcilerEnv) hasSwitch(name string) bool {
	var lss []nb.LogicalSwitch
	_ = e.nb.List(context.Background(), &lss)
	for _, ls := range lss {
		if ls.Name == name {
			return true
		}
	}
	return false
}
