package mirror

import (
	"context"
	"net/netip"
	"slices"
	"strconv"
	"testing"
	"time"

	libovsdb "github.com/ovn-org/libovsdb/client"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/kovn/kovn/pkg/cni"
	"github.com/kovn/kovn/pkg/contract"
	"github.com/kovn/kovn/pkg/ovn"
	"github.com/kovn/kovn/pkg/ovn/model/vswitch"
	"github.com/kovn/kovn/pkg/ovn/ovntest"
)

// mirrorOVS is an in-memory Open_vSwitch database with br-int, served like a node's.
func mirrorOVS(t *testing.T) libovsdb.Client {
	c, _ := ovntest.ServeOVS(t, cni.DefaultBridge, nil)
	return c
}

// reconcileMirrors runs passes until one asks for nothing more (the ports, then the mirrors).
func reconcileMirrors(t *testing.T, r *Reconciler) {
	t.Helper()
	for i := 0; i < 10; i++ {
		res, err := r.Reconcile(context.Background(), ctrl.Request{})
		if err != nil {
			t.Fatal(err)
		}
		if res.RequeueAfter == 0 {
			return
		}
		time.Sleep(50 * time.Millisecond) // the cache catches up
	}
	t.Fatal("mirror reconcile never settled")
}

// mirrorState is each Mirror row by name: its output port's name and its selected ports'
// names in each direction.
func mirrorState(t *testing.T, c libovsdb.Client) map[string][3][]string {
	t.Helper()
	ctx := context.Background()
	ports, _ := ovn.Find(ctx, c, func(*vswitch.Port) bool { return true })
	name := map[string]string{}
	for _, p := range ports {
		name[p.UUID] = p.Name
	}
	names := func(uuids []string) []string {
		var out []string
		for _, u := range uuids {
			out = append(out, name[u])
		}
		slices.Sort(out)
		return out
	}
	mirrors, _ := ovn.Find(ctx, c, func(*vswitch.Mirror) bool { return true })
	out := map[string][3][]string{}
	for _, m := range mirrors {
		var output []string
		if m.OutputPort != nil {
			output = []string{name[*m.OutputPort]}
		}
		out[m.Name] = [3][]string{output, names(m.SelectSrcPort), names(m.SelectDstPort)}
	}
	return out
}

func hasPort(t *testing.T, c libovsdb.Client, name string) *vswitch.Interface {
	t.Helper()
	br, err := ovn.Get(context.Background(), c, &vswitch.Bridge{Name: cni.DefaultBridge})
	if err != nil {
		t.Fatal(err)
	}
	p, err := ovn.Get(context.Background(), c, &vswitch.Port{Name: name})
	if err != nil || !slices.Contains(br.Ports, p.UUID) {
		return nil
	}
	i, _ := ovn.Get(context.Background(), c, &vswitch.Interface{Name: name})
	return i
}

// TestMirrors: annotated mode mirrors exactly the annotated pods (never a host-network one),
// both directions, to mirror0; all mode every pod; a remote collector gets a GRE port and a
// Mirror of its own; no selected pod leaves no Mirror row; off removes mirror0 too.
func TestMirrors(t *testing.T) {
	ovs := mirrorOVS(t)
	attach := cni.NewOVSAttacher(ovs, cni.DefaultBridge)
	pod := func(name string, mirror, hostNet bool) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name}, Spec: corev1.PodSpec{HostNetwork: hostNet},
			Status: corev1.PodStatus{Phase: corev1.PodRunning}}
		if mirror {
			p.Annotations = map[string]string{Annotation: "true"}
		}
		return p
	}
	pods := []*corev1.Pod{pod("a", true, false), pod("b", false, false), pod("h", true, true)}
	for _, p := range pods[:2] {
		if err := attach.Attach(context.Background(), "veth-"+p.Name, contract.PodPortName("ns", p.Name), nil); err != nil {
			t.Fatal(err)
		}
	}
	s := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(s)
	objs := []client.Object{pods[0], pods[1], pods[2]}
	c := fake.NewClientBuilder().WithScheme(s).WithObjects(objs...).Build()
	var upped []string
	r := &Reconciler{Client: c, OVS: ovs, Bridge: cni.DefaultBridge, Mode: Annotated, Namespaces: []string{"other"},
		LinkUp: func(n string) (bool, error) { upped = append(upped, n); return true, nil }}
	reconcileMirrors(t, r)
	if i := hasPort(t, ovs, Port); i == nil || i.Type != "internal" || !slices.Contains(upped, Port) {
		t.Fatalf("mirror0: %+v, brought up: %v", i, upped)
	}
	// The annotation is the namespace user's; only namespaces the admin allows are mirrored.
	if got := mirrorState(t, ovs); len(got) != 0 {
		t.Errorf("annotated in a namespace not allowed: %v, want no Mirror", got)
	}
	r.Namespaces = []string{"other", "ns"}
	reconcileMirrors(t, r)
	want := map[string][3][]string{"kovn-mirror0": {{Port}, {"veth-a"}, {"veth-a"}}}
	if got := mirrorState(t, ovs); !equalMirrors(got, want) {
		t.Errorf("annotated: %v, want %v", got, want)
	}

	r.Mode = All
	r.Remote = &Remote{Type: "gre", Remote: netipAddr("172.30.0.100"), Key: 7}
	reconcileMirrors(t, r)
	want = map[string][3][]string{
		"kovn-mirror0":       {{Port}, {"veth-a", "veth-b"}, {"veth-a", "veth-b"}},
		"kovn-mirror-remote": {{remotePort}, {"veth-a", "veth-b"}, {"veth-a", "veth-b"}},
	}
	if got := mirrorState(t, ovs); !equalMirrors(got, want) {
		t.Errorf("all, with a GRE collector: %v, want %v", got, want)
	}
	if i := hasPort(t, ovs, remotePort); i == nil || i.Type != "gre" || i.Options["remote_ip"] != "172.30.0.100" || i.Options["key"] != "7" {
		t.Errorf("GRE port: %+v", i)
	}

	r.Mode, r.Remote = Annotated, nil
	delete(pods[0].Annotations, Annotation)
	if err := c.Update(context.Background(), pods[0]); err != nil {
		t.Fatal(err)
	}
	reconcileMirrors(t, r)
	if got := mirrorState(t, ovs); len(got) != 0 {
		t.Errorf("no pod selected: Mirror rows %v left", got)
	}
	if hasPort(t, ovs, remotePort) != nil || hasPort(t, ovs, Port) == nil {
		t.Error("without a remote its port must go, mirror0 stay")
	}

	r.Mode = Off
	reconcileMirrors(t, r)
	if hasPort(t, ovs, Port) != nil || len(mirrorState(t, ovs)) != 0 {
		t.Error("mode off: mirror0 or a Mirror row left")
	}
}

func equalMirrors(a, b map[string][3][]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		w, ok := b[k]
		if !ok {
			return false
		}
		for i := range v {
			if !slices.Equal(v[i], w[i]) {
				return false
			}
		}
	}
	return true
}

func TestParseMirrorRemote(t *testing.T) {
	for in, want := range map[string]string{
		"gre:10.0.0.5": "gre 10.0.0.5 1", "gre:10.0.0.5:7": "gre 10.0.0.5 7", "erspan:[fd00::5]:3": "erspan fd00::5 3",
		"erspan:fd00::5": "erspan fd00::5 1", "": "<nil>", "vxlan:10.0.0.5": "error", "gre:nowhere": "error", "gre:10.0.0.5:x": "error",
	} {
		r, err := ParseRemote(in)
		got := "<nil>"
		switch {
		case err != nil:
			got = "error"
		case r != nil:
			got = r.Type + " " + r.Remote.String() + " " + itoa(r.Key)
		}
		if got != want {
			t.Errorf("%q: %s, want %s", in, got, want)
		}
	}
}

func netipAddr(s string) netip.Addr { return netip.MustParseAddr(s) }
func itoa(i int) string             { return strconv.Itoa(i) }
