package nbsync

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/ovn-org/libovsdb/client"
	"github.com/ovn-org/libovsdb/model"
	"github.com/ovn-org/libovsdb/ovsdb"
	"k8s.io/utils/ptr"

	"github.com/kovn/kovn/pkg/cluster/topology"
	"github.com/kovn/kovn/pkg/ovn"
	"github.com/kovn/kovn/pkg/ovn/model/nb"
	"github.com/kovn/kovn/pkg/ovn/ovntest"
)

func lbgNamed(t *testing.T, c client.Client, n string) nb.LoadBalancerGroup {
	return named(t, c, n, func(r nb.LoadBalancerGroup) string { return r.Name })
}

// transact creates ms and applies muts in one transaction, as another writer would, and waits
// until the cache has it.
func transact(t *testing.T, c client.Client, ms []model.Model, muts func() []ovsdb.Operation, done func() bool) {
	t.Helper()
	var ops []ovsdb.Operation
	for _, m := range ms {
		o, err := c.Create(m)
		if err != nil {
			t.Fatal(err)
		}
		ops = append(ops, o...)
	}
	if muts != nil {
		ops = append(ops, muts()...)
	}
	if _, err := ovn.Transact(context.Background(), c, ops); err != nil {
		t.Fatal(err)
	}
	waitFor(t, done)
}

// withNBGlobal creates the NB_Global row northd creates in a real database.
func withNBGlobal(t *testing.T, c client.Client) {
	if len(list[nb.NBGlobal](t, c)) == 0 {
		ovntest.CreateNBGlobal(t, c)
	}
}

// lbBase is base without the Services' load balancer group the join subnet owns and the
// default VPC's switches reference: the tests below manage groups of their own.
func lbBase(t *testing.T, c client.Client) {
	t.Helper()
	for _, sh := range []topology.Shard{topology.ForVpc(topology.VpcIn{Name: "ovn-cluster"}, &join),
		topology.ForSubnet(join, &join, nil), topology.ForSubnet(def, &join, nil), topology.ForNode(n1, &join), topology.ForNode(n2, &join)} {
		sh.LoadBalancerGroups = nil
		for i := range sh.Switches {
			sh.Switches[i].LBGroups = nil
		}
		apply(t, c, sh)
	}
}

func groupShard(groups ...string) topology.Shard {
	sh := topology.Shard{OwnerType: topology.OwnerVpc, Owner: "lbs"}
	for _, g := range groups {
		sh.LoadBalancerGroups = append(sh.LoadBalancerGroups, topology.LoadBalancerGroup{Name: g})
	}
	return sh
}

func serviceShard(vips map[string]string, groups ...string) topology.Shard {
	return topology.Shard{OwnerType: "Service", Owner: "default/web", LoadBalancers: []topology.LoadBalancer{{
		Name: "web-tcp", Protocol: "tcp", VIPs: vips, Options: map[string]string{"reject": "true"},
		SelectionFields: []string{"ip_src"}, ExternalIDs: map[string]string{"k8s.ovn.org/kind": "Service"}, Groups: groups}}}
}

// subnetWithGroups and vpcWithGroups are ovn-default's and ovn-cluster's shards referencing
// load balancer groups.
func subnetWithGroups(groups ...string) topology.Shard {
	sh := topology.ForSubnet(def, &join, nil)
	sh.LoadBalancerGroups = nil
	sh.Switches[0].LBGroups = groups
	return sh
}

func vpcWithGroups(groups ...string) topology.Shard {
	sh := topology.ForVpc(topology.VpcIn{Name: "ovn-cluster"}, &join)
	sh.Routers[0].LBGroups = groups
	return sh
}

// ours returns this writer's LBs named web-tcp.
func ours(t *testing.T, c client.Client) []nb.LoadBalancer {
	var out []nb.LoadBalancer
	for _, lb := range list[nb.LoadBalancer](t, c) {
		if lb.ExternalIDs[ovn.WriterKey] == Writer {
			out = append(out, lb)
		}
	}
	return out
}

// otherWriter adds, as another writer would, an LB named like the Service's (web-tcp) to
// cluster_lbs and a group of its own to ovn-default. It returns a check that both are still
// there.
func otherWriter(t *testing.T, c client.Client) func(step string) {
	foreignLB := nb.LoadBalancer{UUID: "flb", Name: "web-tcp", Vips: map[string]string{"10.96.0.9:80": ""},
		ExternalIDs: map[string]string{ovn.OwnerTypeKey: "Service", ovn.OwnerKey: "default/web", ovn.WriterKey: "services"}}
	foreignGroup := nb.LoadBalancerGroup{UUID: "fg", Name: "other_lbs"}
	cluster, ls := lbgNamed(t, c, "cluster_lbs"), lsNamed(t, c, "ovn-default")
	transact(t, c, []model.Model{&foreignLB, &foreignGroup}, func() []ovsdb.Operation {
		return []ovsdb.Operation{refMutation("Load_Balancer_Group", cluster.UUID, "load_balancer", ovsdb.MutateOperationInsert, "flb"),
			refMutation("Logical_Switch", ls.UUID, "load_balancer_group", ovsdb.MutateOperationInsert, "fg")}
	}, func() bool { return len(lsNamed(t, c, "ovn-default").LoadBalancerGroup) == 1 })
	lbUUID := named(t, c, "web-tcp", func(r nb.LoadBalancer) string { return r.Name }).UUID
	groupUUID := lbgNamed(t, c, "other_lbs").UUID
	return func(step string) {
		t.Helper()
		if g := lbgNamed(t, c, "cluster_lbs"); !slices.Contains(g.LoadBalancer, lbUUID) {
			t.Fatalf("%s: the services writer's LB left cluster_lbs: %v", step, g.LoadBalancer)
		}
		if ls := lsNamed(t, c, "ovn-default"); !slices.Contains(ls.LoadBalancerGroup, groupUUID) {
			t.Fatalf("%s: ovn-default lost another writer's group: %v", step, ls.LoadBalancerGroup)
		}
	}
}

// TestLoadBalancerLifecycle: a Service's LB is created in a group another shard owns, which a
// switch and a router reference; a VIP change costs one update; an unchanged shard costs
// nothing; the LB moves to another group and then goes. Another writer's LB (of the same
// name, in the same group) and another writer's group on the same switch survive throughout.
func TestLoadBalancerLifecycle(t *testing.T) {
	c := connect(t)
	withNBGlobal(t, c)
	lbBase(t, c)
	apply(t, c, groupShard("cluster_lbs", "node_lbs"))
	survivors := otherWriter(t, c)

	apply(t, c, subnetWithGroups("cluster_lbs"))
	apply(t, c, vpcWithGroups("cluster_lbs"))
	vips := map[string]string{"10.96.0.10:80": "10.16.0.5:8080"}
	apply(t, c, serviceShard(vips, "cluster_lbs"))
	cluster := lbgNamed(t, c, "cluster_lbs")
	mine := ours(t, c)
	if len(mine) != 1 || !sameMap(mine[0].Vips, vips) || ptr.Deref(mine[0].Protocol, "") != "tcp" ||
		mine[0].ExternalIDs["k8s.ovn.org/kind"] != "Service" || mine[0].ExternalIDs[ovn.OwnerKey] != "default/web" {
		t.Fatalf("created LBs: %+v", mine)
	}
	if len(cluster.LoadBalancer) != 2 || !slices.Contains(cluster.LoadBalancer, mine[0].UUID) {
		t.Fatalf("cluster_lbs holds %v, want the services writer's LB and %s", cluster.LoadBalancer, mine[0].UUID)
	}
	if ls := lsNamed(t, c, "ovn-default"); len(ls.LoadBalancerGroup) != 2 || !slices.Contains(ls.LoadBalancerGroup, cluster.UUID) {
		t.Fatalf("ovn-default references %v, want other_lbs and cluster_lbs", ls.LoadBalancerGroup)
	}
	if lr := lrNamed(t, c, "ovn-cluster"); !slices.Equal(lr.LoadBalancerGroup, []string{cluster.UUID}) {
		t.Fatalf("ovn-cluster references %v, want cluster_lbs", lr.LoadBalancerGroup)
	}
	survivors("created")

	for _, sh := range []topology.Shard{groupShard("cluster_lbs", "node_lbs"), subnetWithGroups("cluster_lbs"),
		vpcWithGroups("cluster_lbs"), serviceShard(vips, "cluster_lbs")} {
		if n := apply(t, c, sh); n != 0 {
			t.Errorf("re-applying %s/%s sent %d operations, want 0", sh.OwnerType, sh.Owner, n)
		}
	}

	vips["10.96.0.10:80"] = "10.16.0.5:8080,10.16.0.6:8080"
	ops, missing, err := Plan(context.Background(), c, serviceShard(vips, "cluster_lbs"))
	if err != nil || len(missing) > 0 || len(ops) != 1 || ops[0].Op != ovsdb.OperationUpdate || ops[0].Table != "Load_Balancer" {
		t.Fatalf("VIP change: ops %+v, missing %v, err %v; want one update of Load_Balancer", ops, missing, err)
	}
	apply(t, c, serviceShard(vips, "cluster_lbs"))
	if mine := ours(t, c); len(mine) != 1 || !sameMap(mine[0].Vips, vips) {
		t.Fatalf("after the VIP change: %+v", mine)
	}
	survivors("VIPs changed")

	apply(t, c, serviceShard(vips, "node_lbs"))
	mine = ours(t, c)
	if g := lbgNamed(t, c, "cluster_lbs"); slices.Contains(g.LoadBalancer, mine[0].UUID) {
		t.Fatalf("the LB stays in cluster_lbs after moving to node_lbs: %v", g.LoadBalancer)
	}
	if g := lbgNamed(t, c, "node_lbs"); !slices.Equal(g.LoadBalancer, []string{mine[0].UUID}) {
		t.Fatalf("node_lbs holds %v, want %s", g.LoadBalancer, mine[0].UUID)
	}
	survivors("moved")

	apply(t, c, topology.Shard{OwnerType: "Service", Owner: "default/web"})
	if mine := ours(t, c); len(mine) != 0 {
		t.Fatalf("LBs left after the Service went: %+v", mine)
	}
	if g := lbgNamed(t, c, "node_lbs"); len(g.LoadBalancer) != 0 {
		t.Fatalf("node_lbs still holds %v after the Service went", g.LoadBalancer)
	}
	survivors("Service deleted") // also: both groups of the other shard are still there

	apply(t, c, subnetWithGroups()) // the subnet stops referencing cluster_lbs
	if ls := lsNamed(t, c, "ovn-default"); len(ls.LoadBalancerGroup) != 1 || slices.Contains(ls.LoadBalancerGroup, cluster.UUID) {
		t.Fatalf("ovn-default references %v after dropping cluster_lbs, want only other_lbs", ls.LoadBalancerGroup)
	}
	survivors("switch dropped cluster_lbs")
}

// TestLoadBalancerGroupMissing: an LB and a switch naming a group nobody created yet are
// reported with ErrParentMissing, the rest is applied, and both join once the group exists.
func TestLoadBalancerGroupMissing(t *testing.T) {
	c := connect(t)
	withNBGlobal(t, c)
	lbBase(t, c)
	vips := map[string]string{"10.96.0.10:80": "10.16.0.5:8080"}
	for _, sh := range []topology.Shard{serviceShard(vips, "cluster_lbs"), subnetWithGroups("cluster_lbs")} {
		if _, err := Apply(context.Background(), c, sh); !errors.Is(err, ErrParentMissing) {
			t.Fatalf("%s/%s before its group: err %v, want ErrParentMissing", sh.OwnerType, sh.Owner, err)
		}
	}
	if mine := ours(t, c); len(mine) != 1 || !sameMap(mine[0].Vips, vips) {
		t.Fatalf("the LB was not created without its group: %+v", mine)
	}
	apply(t, c, groupShard("cluster_lbs"))
	apply(t, c, serviceShard(vips, "cluster_lbs"))
	apply(t, c, subnetWithGroups("cluster_lbs"))
	g := lbgNamed(t, c, "cluster_lbs")
	if !slices.Equal(g.LoadBalancer, []string{ours(t, c)[0].UUID}) {
		t.Fatalf("cluster_lbs holds %v once created, want the LB", g.LoadBalancer)
	}
	if ls := lsNamed(t, c, "ovn-default"); !slices.Equal(ls.LoadBalancerGroup, []string{g.UUID}) {
		t.Fatalf("ovn-default references %v once the group exists, want it", ls.LoadBalancerGroup)
	}
}

// TestLoadBalancerGroupOwnedAndDeleted: a shard creating a group, an LB in it and a switch and
// a router referencing it gets them all in one transaction (the group's insert lists the LB,
// the switch's and router's inserts list the group). Its owner shows in Owners although the
// group row carries no external_ids, and deleting the group's shard removes the group even
// though switches and routers of other shards still reference it.
func TestLoadBalancerGroupOwnedAndDeleted(t *testing.T) {
	c := connect(t)
	withNBGlobal(t, c)
	lbBase(t, c)
	sh := groupShard("cluster_lbs")
	sh.Switches = []topology.Switch{{Name: "svc", LBGroups: []string{"cluster_lbs"}}}
	sh.Routers = []topology.Router{{Name: "svc-r", LBGroups: []string{"cluster_lbs"}}}
	sh.LoadBalancers = serviceShard(map[string]string{"10.96.0.1:443": ""}, "cluster_lbs").LoadBalancers
	apply(t, c, sh)
	g := lbgNamed(t, c, "cluster_lbs")
	if len(g.LoadBalancer) != 1 || !slices.Equal(lsNamed(t, c, "svc").LoadBalancerGroup, []string{g.UUID}) ||
		!slices.Equal(lrNamed(t, c, "svc-r").LoadBalancerGroup, []string{g.UUID}) {
		t.Fatalf("one transaction: group %+v, switch %v, router %v", g, lsNamed(t, c, "svc").LoadBalancerGroup,
			lrNamed(t, c, "svc-r").LoadBalancerGroup)
	}
	if n := apply(t, c, sh); n != 0 {
		t.Fatalf("re-applying sent %d operations, want 0", n)
	}
	apply(t, c, groupShard()) // LBs, switch and router of sh go too
	apply(t, c, groupShard("cluster_lbs"))
	apply(t, c, subnetWithGroups("cluster_lbs"))
	apply(t, c, vpcWithGroups("cluster_lbs"))
	owners, err := Owners(context.Background(), c)
	if err != nil || !owners[Owner{topology.OwnerVpc, "lbs"}] {
		t.Fatalf("Owners: %v, %v; want the owner of nothing but a load balancer group", owners, err)
	}
	apply(t, c, topology.Shard{OwnerType: topology.OwnerVpc, Owner: "lbs"})
	if n := len(list[nb.LoadBalancerGroup](t, c)); n != 0 {
		t.Fatalf("%d groups left after their owner went", n)
	}
	if ls, lr := lsNamed(t, c, "ovn-default"), lrNamed(t, c, "ovn-cluster"); len(ls.LoadBalancerGroup)+len(lr.LoadBalancerGroup) != 0 {
		t.Fatalf("references to the deleted group left: switch %v, router %v", ls.LoadBalancerGroup, lr.LoadBalancerGroup)
	}
	if owners, _ := Owners(context.Background(), c); owners[Owner{topology.OwnerVpc, "lbs"}] {
		t.Fatal("the group owner is still listed after its shard was deleted")
	}
}

// TestOwnersListsLoadBalancerOwners: a Service that owns only LBs is found by the orphan
// collector's scan (its owner type must be one Owners reports).
func TestOwnersListsLoadBalancerOwners(t *testing.T) {
	c := connect(t)
	sh := serviceShard(map[string]string{"10.96.0.1:443": ""})
	sh.OwnerType = topology.OwnerPod
	apply(t, c, sh)
	owners, err := Owners(context.Background(), c)
	if err != nil || !owners[Owner{topology.OwnerPod, "default/web"}] {
		t.Fatalf("Owners: %v, %v; want the owner of nothing but a load balancer", owners, err)
	}
}

// TestLoadBalancerGroupWithoutNBGlobal: group owners are recorded in NB_Global; before northd
// has created it, a shard's groups are reported missing (none is created that could not be
// deleted later) and the rest of the shard is applied.
func TestLoadBalancerGroupWithoutNBGlobal(t *testing.T) {
	c := connectBare(t)
	sh := groupShard("cluster_lbs")
	sh.Switches = []topology.Switch{{Name: "svc"}}
	if _, err := Apply(context.Background(), c, sh); !errors.Is(err, ErrParentMissing) {
		t.Fatalf("group without NB_Global: err %v, want ErrParentMissing", err)
	}
	if n := len(list[nb.LoadBalancerGroup](t, c)); n != 0 {
		t.Fatalf("%d groups created with no NB_Global to record their owner", n)
	}
	lsNamed(t, c, "svc")
	withNBGlobal(t, c)
	apply(t, c, sh)
	lbgNamed(t, c, "cluster_lbs")
}
