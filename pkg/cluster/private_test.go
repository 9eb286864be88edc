package cluster

import (
	"context"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	kovnv1 "github.com/kovn/kovn/api/v1alpha1"
	"github.com/kovn/kovn/pkg/cluster/topology"
	"github.com/kovn/kovn/pkg/ovn/model/nb"
)

// A private Subnet is Supported (no longer reported as unimplemented) and its switch gets
// the drop that admits its own CIDR, its allowSubnets and the join CIDR; turning private off
// removes the ACLs.
func TestPrivateSubnetProgrammed(t *testing.T) {
	o := DefaultOptions()
	sn := subnetAt("priv", "10.40.0.0/24", created0)
	sn.Spec.Private, sn.Spec.AllowSubnets = true, []string{"10.41.0.0/24"}
	e := defaultEnv(t, sn)
	e.reconcileSubnet(t, "priv")
	var got kovnv1.Subnet
	_ = e.c.Get(context.Background(), types.NamespacedName{Name: "priv"}, &got)
	if c := findCondition(got.Status.Conditions, kovnv1.ConditionSupported); c == nil || c.Status != metav1.ConditionTrue {
		t.Errorf("Supported %+v, want True", c)
	}
	want := "ip4.dst == 10.40.0.0/24 && !(ip4.src == {10.40.0.0/24, 10.41.0.0/24, " + o.JoinCIDR + "})"
	if m := privateMatches(t, e); len(m) != 2 || !strings.Contains(strings.Join(m, "\n"), want) {
		t.Errorf("ACL matches %q, want the stateful one and %q", m, want)
	}
	got.Spec.Private = false
	if err := e.c.Update(context.Background(), &got); err != nil {
		t.Fatal(err)
	}
	e.reconcileSubnet(t, "priv")
	// Deletes reach the client's cache asynchronously (Apply waits only for inserts).
	for deadline := time.Now().Add(5 * time.Second); len(privateMatches(t, e)) != 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("private turned off, ACLs left: %q", privateMatches(t, e))
		}
	}
}

func privateMatches(t *testing.T, e *reconcilerEnv) []string {
	t.Helper()
	var acls []nb.ACL
	if err := e.nb.List(context.Background(), &acls); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, a := range acls {
		if a.ExternalIDs[topology.SubnetKey] == "priv" {
			out = append(out, a.Match)
		}
	}
	return out
}
