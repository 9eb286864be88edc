package guard

import (
	"context"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	libovsdb "github.com/ovn-org/libovsdb/client"
	"github.com/ovn-org/libovsdb/ovsdb"

	"github.com/kovn/kovn/pkg/cni"
	"github.com/kovn/kovn/pkg/ovn"
	"github.com/kovn/kovn/pkg/ovn/model/vswitch"
	"github.com/kovn/kovn/pkg/ovn/ovntest"
)

// recordingPorts records Detach calls; the real attacher's Detach is tested in pkg/cni.
type recordingPorts struct {
	cni.PortAttacher
	detached []string
}

func (r *recordingPorts) Detach(_ context.Context, hostIf string) error {
	r.detached = append(r.detached, hostIf)
	return nil
}

func TestPortGCRemovesOnlyPortsOfGonePods(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	iface := func(name, ns, pod, uid string) *vswitch.Interface {
		ids := map[string]string{"iface-id": pod + "." + ns}
		if pod != "" {
			ids[cni.ExtIDPodNamespace], ids[cni.ExtIDPodName], ids[cni.ExtIDPodUID] = ns, pod, uid
		}
		return &vswitch.Interface{UUID: ovn.NewNamedUUID(), Name: name, ExternalIDs: ids}
	}
	rows := []*vswitch.Interface{
		iface("alive_h", "default", "alive", "u1"),
		iface("gone_h", "default", "gone", "u2"),
		iface("recreated_h", "default", "recreated", "old-uid"),
		iface("ovn0", "", "", ""),
	}
	ovs := ovsWithInterfaces(ctx, t, nil, rows...)
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	pod := func(name, uid string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, UID: types.UID(uid)}}
	}
	alive := pod("alive", "u1")
	recreated := pod("recreated", "u9") // same name, new uid: the old port is stale
	cache := fake.NewClientBuilder().WithScheme(scheme).WithObjects(alive).Build()
	live := fake.NewClientBuilder().WithScheme(scheme).WithObjects(alive.DeepCopy(), recreated).Build()
	ports := &recordingPorts{}
	gc := &PortGC{Client: cache, Live: live, OVS: ovs, Ports: ports}
	if err := gc.Collect(ctx); err != nil {
		t.Fatal(err)
	}
	slices.Sort(ports.detached)
	if !slices.Equal(ports.detached, []string{"gone_h", "recreated_h"}) {
		t.Fatalf("detached %v, want [gone_h recreated_h]", ports.detached)
	}
}

// ovsWithInterfaces serves an in-memory Open_vSwitch database holding br-int with one port per
// interface (and rootIDs as the Open_vSwitch row's external_ids), connected and cached.
func ovsWithInterfaces(ctx context.Context, t *testing.T, rootIDs map[string]string, rows ...*vswitch.Interface) libovsdb.Client {
	t.Helper()
	ovs := serveOVS(ctx, t)
	// Interface and Port rows live only while referenced: build the Open_vSwitch -> Bridge ->
	// Port -> Interface chain in one transaction.
	br := &vswitch.Bridge{UUID: ovn.NewNamedUUID(), Name: "br-int"}
	models := []any{}
	for _, r := range rows {
		port := &vswitch.Port{UUID: ovn.NewNamedUUID(), Name: r.Name, Interfaces: []string{r.UUID}}
		br.Ports = append(br.Ports, port.UUID)
		models = append(models, r, port)
	}
	root := &vswitch.OpenvSwitch{UUID: ovn.NewNamedUUID(), Bridges: []string{br.UUID}, ExternalIDs: rootIDs}
	var ops []ovsdb.Operation
	for _, m := range append(models, br, root) {
		o, err := ovs.Create(m)
		if err != nil {
			t.Fatal(err)
		}
		ops = append(ops, o...)
	}
	if _, err := ovn.Transact(ctx, ovs, ops); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(5 * time.Second); ; { // the monitor fills the cache asynchronously
		var got []vswitch.Interface
		if err := ovs.List(ctx, &got); err != nil {
			t.Fatal(err)
		}
		if len(got) == len(rows) {
			return ovs
		}
		if time.Now().After(deadline) {
			t.Fatalf("cache holds %d interfaces, want %d", len(got), len(rows))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// serveOVS serves an empty Open_vSwitch database in memory and connects a client to it.
func serveOVS(ctx context.Context, t *testing.T) libovsdb.Client {
	t.Helper()
	db, err := vswitch.DatabaseModel()
	if err != nil {
		t.Fatal(err)
	}
	ovs, err := ovn.ConnectOVS(ctx, ovn.Config{Endpoints: []string{ovntest.Serve(t, ovntest.SocketPath(t), db)}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ovs.Close)
	return ovs
}
