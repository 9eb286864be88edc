package rig

import (
	"context"
	"encoding/json"
	"net/netip"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

func TestFakeNodeAddressesAreUniqueAndOffTheRig(t *testing.T) {
	bench := netip.MustParsePrefix("198.18.0.0/15")
	seen := map[netip.Addr]string{}
	for c := 1; c <= 9; c++ {
		for i := 1; i <= MaxFakeNodes; i++ {
			ip := FakeNodeIP(c, i)
			if !bench.Contains(ip) || fabricPrefix.Contains(ip) {
				t.Fatalf("fake node %d/%d at %s: outside 198.18.0.0/15 or on the fabric", c, i, ip)
			}
			if other, dup := seen[ip]; dup {
				t.Fatalf("%s and %s share %s", FakeNodeName(c, i), other, ip)
			}
			seen[ip] = FakeNodeName(c, i)
		}
	}
}

func TestFakeNodeLooksRegisteredByAKubelet(t *testing.T) {
	now := time.Unix(1700000000, 0)
	n := FakeNode(1, 7, now)
	if n.Name != "c1-f7" || n.Labels[FakeNodeLabel] != "true" || !nodeReady(n) {
		t.Fatalf("node %s labels %v ready %v", n.Name, n.Labels, nodeReady(n))
	}
	if len(n.Spec.Taints) != 1 || n.Spec.Taints[0].Effect != corev1.TaintEffectNoSchedule {
		t.Fatalf("taints %v: the scheduler must keep real pods off fake nodes", n.Spec.Taints)
	}
	if n.Status.Addresses[0].Type != corev1.NodeInternalIP || n.Status.Addresses[0].Address != FakeNodeIP(1, 7).String() {
		t.Fatalf("addresses %v", n.Status.Addresses)
	}
	l := FakeLease(n.Name, now)
	if l.Namespace != corev1.NamespaceNodeLease || *l.Spec.HolderIdentity != n.Name || !l.Spec.RenewTime.Time.Equal(now) {
		t.Fatalf("lease %+v", l)
	}
}

func TestKeepFakeNodeRegistersRenewsAndRevives(t *testing.T) {
	ctx := context.Background()
	kc := fake.NewSimpleClientset()
	if err := keepFakeNode(ctx, kc, 1, 1, nil); err != nil {
		t.Fatal(err)
	}
	n, err := kc.CoreV1().Nodes().Get(ctx, "c1-f1", metav1.GetOptions{})
	if err != nil || !nodeReady(n) {
		t.Fatalf("node not registered Ready: %v", err)
	}
	l1, err := kc.CoordinationV1().Leases(corev1.NamespaceNodeLease).Get(ctx, "c1-f1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// node lifecycle marked it NotReady: the keeper reports Ready again and renews the lease
	n.Status.Conditions[0].Status = corev1.ConditionUnknown
	if _, err := kc.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Millisecond)
	if err := keepFakeNode(ctx, kc, 1, 1, n); err != nil {
		t.Fatal(err)
	}
	n, _ = kc.CoreV1().Nodes().Get(ctx, "c1-f1", metav1.GetOptions{})
	l2, _ := kc.CoordinationV1().Leases(corev1.NamespaceNodeLease).Get(ctx, "c1-f1", metav1.GetOptions{})
	if !nodeReady(n) || !l1.Spec.RenewTime.Before(l2.Spec.RenewTime) {
		t.Fatalf("not revived (ready %v) or lease not renewed (%v -> %v)", nodeReady(n), l1.Spec.RenewTime, l2.Spec.RenewTime)
	}
}

func TestConfigSizesFakeAndBridgeNodes(t *testing.T) {
	ok := Config{Dir: "/tmp/x", Nodes: 3, FakeNodes: 200, BridgeNodes: 1, K8sBinDir: "/k", KovnBinDir: "/b"}
	c, err := ok.Defaults()
	if err != nil {
		t.Fatal(err)
	}
	if c.BridgeNode(1) || c.BridgeNode(2) || !c.BridgeNode(3) {
		t.Fatal("bridge nodes must be the last BridgeNodes nodes")
	}
	for _, bad := range []Config{{FakeNodes: -1}, {FakeNodes: MaxFakeNodes + 1}, {Nodes: 2, BridgeNodes: 3}} {
		bad.Dir, bad.K8sBinDir, bad.KovnBinDir = "/tmp/x", "/k", "/b"
		if _, err := bad.Defaults(); err == nil {
			t.Fatalf("%+v accepted", bad)
		}
	}
}

func TestBridgeConflist(t *testing.T) {
	b, err := bridgeConflist(1, 2)
	if err != nil {
		t.Fatal(err)
	}
	var conf struct {
		Plugins []struct {
			Type string `json:"type"`
			IPAM struct {
				Type   string                `json:"type"`
				Ranges [][]map[string]string `json:"ranges"`
			} `json:"ipam"`
		} `json:"plugins"`
	}
	if err := json.Unmarshal(b, &conf); err != nil {
		t.Fatal(err)
	}
	p := conf.Plugins[0]
	if p.Type != "bridge" || p.IPAM.Type != "host-local" || p.IPAM.Ranges[0][0]["subnet"] != "10.241.2.0/24" {
		t.Fatalf("conflist %s", b)
	}
	if BridgePodCIDR(1, 2).Overlaps(PodCIDR(1)) || BridgePodCIDR(9, 50).Overlaps(ServiceCIDR(9)) {
		t.Fatal("bridge pod ranges overlap kovn's")
	}
}
