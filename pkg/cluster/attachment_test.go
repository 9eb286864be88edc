package cluster

import (
	"context"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nadv1 "github.com/kovn/kovn/api/nad/v1"
	kovnv1 "github.com/kovn/kovn/api/v1alpha1"
	"github.com/kovn/kovn/pkg/contract"
	"github.com/kovn/kovn/pkg/netattach"
	"github.com/kovn/kovn/pkg/ovn/model/nb"
)

// attachmentEnv: ns1 with a kovn network (att: Subnet att), a macvlan with kovn IPAM (mv:
// Subnet mv), a bridge with its own IPAM and a definition that does not parse; namespace
// shared (annotated) and other (not), each with a kovn network whose Subnet exists.
func attachmentEnv(t *testing.T, pods ...*corev1.Pod) (*reconcilerEnv, *AttachmentReconciler) {
	t.Helper()
	nad := func(ns, name, config string) *nadv1.NetworkAttachmentDefinition {
		return &nadv1.NetworkAttachmentDefinition{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: nadv1.NetworkAttachmentDefinitionSpec{Config: config}}
	}
	provided := func(name, cidr, provider string) *kovnv1.Subnet {
		s := subnetAt(name, cidr, created0)
		s.Spec.Provider = provider
		return s
	}
	o := DefaultOptions()
	objs := []client.Object{subnetAt(o.DefaultSubnet, o.DefaultSubnetCIDR, created0), subnetAt(o.JoinSubnet, o.JoinCIDR, created0),
		provided("att", "10.20.0.0/24,fd00:20::/64", "ns1/att"), provided("mv", "172.28.50.0/24", "ns1/mv"),
		provided("sh", "10.21.0.0/24", "shared/sh"), provided("priv", "10.22.0.0/24", "other/priv"),
		nad("ns1", "att", `{"cniVersion": "1.0.0", "type": "kovn"}`),
		nad("ns1", "mv", `{"cniVersion": "1.0.0", "type": "macvlan", "master": "eth1", "ipam": {"type": "kovn"}}`),
		nad("ns1", "own", `{"cniVersion": "1.0.0", "type": "bridge", "ipam": {"type": "static"}}`),
		nad("ns1", "bad", `{"cniVersion": "1.0.0", "type": `),
		nad("shared", "sh", `{"cniVersion": "1.0.0", "type": "kovn-cni"}`),
		nad("other", "priv", `{"cniVersion": "1.0.0", "type": "kovn"}`),
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "shared", Annotations: map[string]string{netattach.SharedNetworksAnnotation: "true"}}},
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "other"}},
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}},
	}
	for _, p := range pods {
		objs = append(objs, p)
	}
	e := newReconcilerEnv(t, objs...)
	for _, s := range []string{o.DefaultSubnet, o.JoinSubnet, "att", "mv", "sh", "priv"} {
		e.reconcileSubnet(t, s)
	}
	e.reconcile(t, e.nodes, "", "n1")
	return e, &AttachmentReconciler{Client: e.c, State: e.st, Recorder: e.rec, Delegates: netattach.AllowingHostInterfaces("eth1", "cni0")}
}

func attachedPod(name, networks string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns1", Name: name, Annotations: map[string]string{netattach.NetworksAnnotation: networks}},
		Spec: corev1.PodSpec{NodeName: "n1"}}
}

func reconcileAttachments(t *testing.T, r *AttachmentReconciler, name string) {
	t.Helper()
	if _, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: types.NamespacedName{Namespace: "ns1", Name: name}}); err != nil {
		t.Fatalf("reconcile %s: %v", name, err)
	}
}

// attachmentIPsOf lists the pod's attachment IP objects as "interface network addresses mac delegated".
func attachmentIPsOf(t *testing.T, e *reconcilerEnv, name string) []string {
	t.Helper()
	var ips kovnv1.IPList
	if err := e.c.List(context.Background(), &ips); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, ip := range ips.Items {
		if ip.Spec.PodName != name || ip.Spec.Interface == "" {
			continue
		}
		if ip.Name != AttachmentIPName("ns1", name, ip.Spec.Interface) || ip.Spec.NodeName == "" || ip.Labels[contract.LabelNode] != ip.Spec.NodeName {
			t.Errorf("IP object %s: %+v %v", ip.Name, ip.Spec, ip.Labels)
		}
		addrs := strings.TrimSuffix(ip.Spec.V4IP+","+ip.Spec.V6IP, ",")
		d := ""
		if ip.Spec.Delegated {
			d = " delegated"
		}
		out = append(out, ip.Spec.Interface+" "+ip.Spec.Network+" "+ip.Spec.Subnet+" "+addrs+d)
	}
	slices.Sort(out)
	return out
}

func TestAttachmentReconciler(t *testing.T) {
	for _, tc := range []struct {
		desc     string
		networks string
		want     []string // attachmentIPsOf, addresses as allocated in order from each Subnet
		event    string   // the only event's reason and a fragment of its message
	}{
		{desc: "kovn network and a macvlan with kovn IPAM", networks: "att,mv@net5",
			want: []string{"net1 ns1/att att 10.20.0.2,fd00:20::2", "net5 ns1/mv mv 172.28.50.2 delegated"}},
		{desc: "static IP and MAC as the NPWG JSON form asks", networks: `[{"name": "att", "ips": ["10.20.0.50/24"], "mac": "02:00:00:00:00:50"}]`,
			want: []string{"net1 ns1/att att 10.20.0.50,fd00:20::2"}}, // the family not asked for is allocated
		{desc: "a delegate with its own IPAM: nothing of kovn's", networks: "own"},
		{desc: "a shared namespace's network", networks: "shared/sh@data", want: []string{"data shared/sh sh 10.21.0.2"}},
		{desc: "another namespace's network, not shared", networks: "att,other/priv", event: "NetworkRefused namespace other does not share"},
		{desc: "a definition that does not parse: none allocated", networks: "att,bad", event: "NetworkRefused NetworkAttachmentDefinition ns1/bad: spec.config is not JSON"},
		{desc: "no such definition", networks: "nope", event: "NetworkRefused network ns1/nope"},
		{desc: "annotation that does not parse", networks: "att@eth0", event: "InvalidNetworks reserved"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			e, r := attachmentEnv(t, attachedPod("a", tc.networks))
			reconcileAttachments(t, r, "a")
			if got := attachmentIPsOf(t, e, "a"); !slices.Equal(got, tc.want) {
				t.Errorf("attachments %q, want %q", got, tc.want)
			}
			evs := e.events()
			if tc.event == "" && len(evs) > 0 || tc.event != "" && (len(evs) != 1 || !strings.HasPrefix(evs[0], "Warning "+strings.Fields(tc.event)[0]+" ") ||
				!strings.Contains(evs[0], strings.SplitN(tc.event, " ", 2)[1])) {
				t.Errorf("events %q, want %q", evs, tc.event)
			}
		})
	}
}

// TestAttachmentLifecycle: a static address held by one pod's attachment is refused to
// another's (and the other's first attachment is taken back, all or nothing); a changed
// annotation leaves the allocation as it is; the pod gone, every attachment address is free
// again and its records are deleted.
func TestAttachmentLifecycle(t *testing.T) {
	e, r := attachmentEnv(t, attachedPod("a", `[{"name": "att", "ips": ["10.20.0.50"]}]`),
		attachedPod("b", `[{"name": "mv"}, {"name": "att", "ips": ["10.20.0.50"]}]`))
	ctx := context.Background()
	reconcileAttachments(t, r, "a")
	e.events()
	reconcileAttachments(t, r, "b")
	if evs := e.events(); len(evs) != 1 || !strings.HasPrefix(evs[0], "Warning IPConflict ") {
		t.Errorf("b's events %q, want one IPConflict", evs)
	}
	if got := attachmentIPsOf(t, e, "b"); len(got) != 0 {
		t.Errorf("b holds %q after a refused attachment, want nothing", got)
	}
	if _, ok := e.st.IPAM.Lookup(attachmentOwner("ns1", "b", "net1")); ok {
		t.Error("b's first attachment is still allocated in the IPAM")
	}

	var a corev1.Pod
	if err := e.c.Get(ctx, types.NamespacedName{Namespace: "ns1", Name: "a"}, &a); err != nil {
		t.Fatal(err)
	}
	a.Annotations[netattach.NetworksAnnotation] = "shared/sh"
	if err := e.c.Update(ctx, &a); err != nil {
		t.Fatal(err)
	}
	reconcileAttachments(t, r, "a")
	if evs := e.events(); len(evs) != 1 || !strings.HasPrefix(evs[0], "Warning NetworksChanged ") {
		t.Errorf("events %q, want one NetworksChanged", evs)
	}
	if got := attachmentIPsOf(t, e, "a"); !slices.Equal(got, []string{"net1 ns1/att att 10.20.0.50,fd00:20::2"}) {
		t.Errorf("a's attachments after the annotation changed: %q", got)
	}

	if err := e.c.Delete(ctx, &a); err != nil {
		t.Fatal(err)
	}
	reconcileAttachments(t, r, "a")
	var ip kovnv1.IP
	if err := e.c.Get(ctx, types.NamespacedName{Name: AttachmentIPName("ns1", "a", "net1")}, &ip); !apierrors.IsNotFound(err) {
		t.Errorf("a's attachment IP object after the pod is gone: %v", err)
	}
	reconcileAttachments(t, r, "b")
	if got := attachmentIPsOf(t, e, "b"); len(got) != 2 || !strings.HasPrefix(got[0], "net1 ns1/mv mv 172.28.50.") || !strings.HasPrefix(got[1], "net2 ns1/att att 10.20.0.50,fd00:20::") {
		t.Errorf("b's attachments once a is gone: %q (events %q)", got, e.events())
	}
}

// TestAttachmentPorts: a kovn attachment gets a port on its Subnet's switch, with its
// addresses and port security, in the pod's shard (gone with the pod); a delegate's addresses
// get none.
func TestAttachmentPorts(t *testing.T) {
	e, r := attachmentEnv(t, attachedPod("a", "att,mv@net5"))
	for _, rec := range []interface {
		Reconcile(context.Context, ctrl.Request) (ctrl.Result, error)
	}{e.pods, r, e.ports} {
		e.reconcile(t, rec, "ns1", "a")
	}
	p := e.lsp("a.ns1.net1")
	want := "10.20.0.2 fd00:20::2"
	if p == nil || len(p.Addresses) != 1 || !strings.HasSuffix(p.Addresses[0], " "+want) || !slices.Equal(p.PortSecurity, p.Addresses) ||
		p.ExternalIDs["interface"] != "net1" {
		t.Fatalf("attachment port %+v, want addresses ending %q, the same port security, interface net1", p, want)
	}
	var switches []nb.LogicalSwitch
	if err := e.nb.List(context.Background(), &switches); err != nil {
		t.Fatal(err)
	}
	sn, _ := e.st.Subnet("att")
	for _, ls := range switches {
		if slices.Contains(ls.Ports, p.UUID) != (ls.Name == sn.Switch) {
			t.Errorf("switch %s has the attachment port: %v (want it on %s only)", ls.Name, slices.Contains(ls.Ports, p.UUID), sn.Switch)
		}
	}
	if e.lsp("a.ns1") == nil || e.lsp("a.ns1.net5") != nil {
		t.Errorf("eth0's port %v, the macvlan's %v: want eth0's only", e.lsp("a.ns1"), e.lsp("a.ns1.net5"))
	}
	if err := e.c.Delete(context.Background(), attachedPod("a", "")); err != nil {
		t.Fatal(err)
	}
	e.reconcile(t, e.ports, "ns1", "a")
	if p := e.lsp("a.ns1.net1"); p != nil {
		t.Errorf("attachment port after the pod is gone: %+v", p)
	}
}

// staleCache hides one IP object from Get and List, as a cache that has not seen it yet.
type staleCache struct {
	client.Client
	hidden string
}

func (c staleCache) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if _, ok := obj.(*kovnv1.IP); ok && key.Name == c.hidden {
		return apierrors.NewNotFound(kovnv1.GroupVersion.WithResource("ips").GroupResource(), key.Name)
	}
	return c.Client.Get(ctx, key, obj, opts...)
}

func (c staleCache) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	if err := c.Client.List(ctx, list, opts...); err != nil {
		return err
	}
	if ips, ok := list.(*kovnv1.IPList); ok {
		ips.Items = slices.DeleteFunc(ips.Items, func(ip kovnv1.IP) bool { return ip.Name == c.hidden })
	}
	return nil
}

// TestAttachmentStaleCache: a pass that finds an attachment's record already written (its
// create says it exists, though the cache missed it) takes nothing back and comes again soon.
func TestAttachmentStaleCache(t *testing.T) {
	e, r := attachmentEnv(t, attachedPod("a", "att,mv"))
	reconcileAttachments(t, r, "a")
	before := attachmentIPsOf(t, e, "a")
	r.Client = staleCache{Client: e.c, hidden: AttachmentIPName("ns1", "a", "net2")}
	res, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: types.NamespacedName{Namespace: "ns1", Name: "a"}})
	if err != nil || res.RequeueAfter == 0 {
		t.Fatalf("reconcile with a stale cache: %+v %v, want a requeue", res, err)
	}
	if got := attachmentIPsOf(t, e, "a"); !slices.Equal(got, before) {
		t.Errorf("attachments %q after a stale-cache pass, want %q kept", got, before)
	}
	if _, ok := e.st.IPAM.Lookup(attachmentOwner("ns1", "a", "net2")); !ok {
		t.Error("the IPAM let go of net2's addresses while its record stays")
	}
}

// TestAttachmentStatefulSet: a StatefulSet pod keeps its attachment addresses across its
// recreation, as eth0's (the record follows it to its new node), and frees them when the
// StatefulSet scales below it.
func TestAttachmentStatefulSet(t *testing.T) {
	yes, two := true, int32(2)
	sts := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Namespace: "ns1", Name: "web"}, Spec: appsv1.StatefulSetSpec{Replicas: &two}}
	pod := func(node string) *corev1.Pod {
		p := attachedPod("web-1", `[{"name": "att"}]`)
		p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "StatefulSet", Name: "web", UID: "u", Controller: &yes}}
		p.Spec.NodeName = node
		return p
	}
	e, r := attachmentEnv(t, pod("n1"))
	ctx := context.Background()
	if err := e.c.Create(ctx, sts); err != nil {
		t.Fatal(err)
	}
	reconcileAttachments(t, r, "web-1")
	before := attachmentIPsOf(t, e, "web-1")
	if len(before) != 1 {
		t.Fatalf("web-1's attachments: %q", before)
	}
	if err := e.c.Delete(ctx, pod("n1")); err != nil {
		t.Fatal(err)
	}
	reconcileAttachments(t, r, "web-1")
	if got := attachmentIPsOf(t, e, "web-1"); !slices.Equal(got, before) {
		t.Fatalf("web-1 gone while its StatefulSet wants it back: %q, want %q kept", got, before)
	}
	if _, ok := e.st.IPAM.Lookup(attachmentOwner("ns1", "web-1", "net1")); !ok {
		t.Fatal("the kept address was released in the IPAM")
	}
	if err := e.c.Create(ctx, pod("n2")); err != nil {
		t.Fatal(err)
	}
	reconcileAttachments(t, r, "web-1")
	var ip kovnv1.IP
	if err := e.c.Get(ctx, types.NamespacedName{Name: AttachmentIPName("ns1", "web-1", "net1")}, &ip); err != nil {
		t.Fatal(err)
	}
	if got := attachmentIPsOf(t, e, "web-1"); !slices.Equal(got, before) || ip.Spec.NodeName != "n2" || ip.Labels[contract.LabelNode] != "n2" {
		t.Errorf("recreated on n2: %q on node %s (label %s), want %q on n2", got, ip.Spec.NodeName, ip.Labels[contract.LabelNode], before)
	}
	// Scaled to 1 and the pod gone: the StatefulSet reconciler frees web-1's attachment.
	if err := e.c.Delete(ctx, pod("n2")); err != nil {
		t.Fatal(err)
	}
	one := int32(1)
	sts.Spec.Replicas = &one
	if err := e.c.Update(ctx, sts); err != nil {
		t.Fatal(err)
	}
	if _, err := (&StatefulSetReconciler{Client: e.c, State: e.st}).Reconcile(ctx, ctrl.Request{NamespacedName: types.NamespacedName{Namespace: "ns1", Name: "web"}}); err != nil {
		t.Fatal(err)
	}
	if got := attachmentIPsOf(t, e, "web-1"); len(got) != 0 {
		t.Errorf("web-1 scaled away: %q left", got)
	}
	if _, ok := e.st.IPAM.Lookup(attachmentOwner("ns1", "web-1", "net1")); ok {
		t.Error("web-1's attachment still allocated after the scale-down")
	}
}
