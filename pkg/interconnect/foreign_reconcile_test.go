package interconnect

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	kovnv1 "github.com/kovn/kovn/api/v1alpha1"
	"github.com/kovn/kovn/pkg/cluster"
	"github.com/kovn/kovn/pkg/ovn"
	"github.com/kovn/kovn/pkg/ovn/model/icnb"
	"github.com/kovn/kovn/pkg/ovn/ovntest"
)

// TestAllocLinkIndex: a ForeignAZ keeps its index unless it is out of range or an earlier
// peering of the reconcile took it; a new one takes the lowest index no status names, so two
// new ForeignAZs of one reconcile get different links; none free is 0.
func TestAllocLinkIndex(t *testing.T) {
	used := map[int]bool{0: true, 2: true} // statuses: two new ForeignAZs and one on link 2
	taken := map[int]bool{}
	if got := allocLinkIndex(used, taken, 2); got != 2 {
		t.Errorf("current link 2: got %d", got)
	}
	taken[2] = true
	first := allocLinkIndex(used, taken, 0)
	taken[first] = true
	second := allocLinkIndex(used, taken, 0)
	if first != 1 || second != 3 {
		t.Errorf("two new ForeignAZs got links %d and %d, want 1 and 3", first, second)
	}
	if got := allocLinkIndex(used, taken, 2); got != 4 {
		t.Errorf("a second status naming link 2: got %d, want 4", got)
	}
	if got := allocLinkIndex(used, taken, MaxForeignLinks+1); got != 5 {
		t.Errorf("out of range: got %d, want 5", got)
	}
	full := map[int]bool{}
	for i := 1; i <= MaxForeignLinks; i++ {
		full[i] = true
	}
	if got := allocLinkIndex(full, map[int]bool{}, 0); got != 0 {
		t.Errorf("every link used: got %d, want 0", got)
	}
}

// TestForeignPeeringsNewLinks: two ForeignAZs created together are resolved in one reconcile
// onto different link networks, and their transit switches are created in IC-NB.
func TestForeignPeeringsNewLinks(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	db, err := icnb.DatabaseModel()
	if err != nil {
		t.Fatal(err)
	}
	icnbc, err := ovn.ConnectICNB(ctx, ovn.Config{Endpoints: []string{ovntest.Serve(t, ovntest.SocketPath(t), db)}})
	if err != nil {
		t.Fatal(err)
	}
	defer icnbc.Close()
	scheme := runtime.NewScheme()
	if err := kovnv1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	foreign := func(name string) *kovnv1.ForeignAZ {
		return &kovnv1.ForeignAZ{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: kovnv1.ForeignAZSpec{
			AZ: name, TransitSwitch: "ts-" + name, TransitAddresses: []string{"169.254.60.1/24"}}}
	}
	r := &Reconciler{Client: fake.NewClientBuilder().WithScheme(scheme).WithObjects(foreign("a"), foreign("b")).Build(),
		State: cluster.NewState(cluster.DefaultOptions())}
	peerings, err := r.foreignPeerings(ctx, icnbc, "az1", clusterset{})
	if err != nil {
		t.Fatal(err)
	}
	if len(peerings) != 2 {
		t.Fatalf("%d peerings, want 2", len(peerings))
	}
	for i, p := range peerings {
		if p.invalid != nil || !p.good || p.in.LinkIndex != i+1 {
			t.Errorf("peering %s: link %d, invalid %v, want link %d", p.obj.Name, p.in.LinkIndex, p.invalid, i+1)
		}
	}
	for _, ts := range []string{"ts-a", "ts-b"} {
		// The cache follows the server's update notification, not the transaction reply.
		for err := icnbc.Get(ctx, &icnb.TransitSwitch{Name: ts}); err != nil; err = icnbc.Get(ctx, &icnb.TransitSwitch{Name: ts}) {
			if ctx.Err() != nil {
				t.Fatalf("transit switch %s: %v", ts, err)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
}
