package cluster

import (
	"context"
	"errors"
	"net/netip"
	"reflect"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/record"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	libovsdb "github.com/ovn-org/libovsdb/client"

	nadv1 "github.com/kovn/kovn/api/nad/v1"
	policyv1 "github.com/kovn/kovn/api/policy/v1beta1"
	kovnv1 "github.com/kovn/kovn/api/v1alpha1"
	"github.com/kovn/kovn/pkg/annotation"
	"github.com/kovn/kovn/pkg/contract"
	"github.com/kovn/kovn/pkg/ipam"
	"github.com/kovn/kovn/pkg/ovn"
	"github.com/kovn/kovn/pkg/ovn/ovntest"
)

type reconcilerEnv struct {
	c       client.Client
	nb      libovsdb.Client
	st      *State
	rec     *record.FakeRecorder
	subnets *SubnetReconciler
	pods    *PodReconciler
	ports   *PodPortReconciler
	nodes   *NodeReconciler
}

func newReconcilerEnv(t *testing.T, objs ...client.Object) *reconcilerEnv {
	t.Helper()
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	if err := kovnv1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	if err := nadv1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	if err := policyv1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	objs = append(objs, &kovnv1.Vpc{ObjectMeta: metav1.ObjectMeta{Name: DefaultOptions().DefaultVpc}})
	c := fake.NewClientBuilder().WithScheme(s).WithObjects(objs...).WithIndex(&kovnv1.IP{}, ipPodKey, ipPodIndex).
		WithStatusSubresource(&kovnv1.Subnet{}, &kovnv1.IPPool{}, &kovnv1.IP{}, &kovnv1.Vpc{}, &kovnv1.Vlan{}, &kovnv1.EgressIP{},
			&policyv1.ClusterNetworkPolicy{}).Build()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	nb, err := ovn.ConnectNB(ctx, ovn.Config{Endpoints: []string{ovntest.ServeNB(t)}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nb.Close)
	ovntest.CreateNBGlobal(t, nb)
	st := NewState(DefaultOptions())
	st.MarkRestored()
	rec := record.NewFakeRecorder(100)
	vpcs := &VpcReconciler{Client: c, State: st, NB: nb}
	if _, err := vpcs.Reconcile(ctx, ctrl.Request{NamespacedName: types.NamespacedName{Name: DefaultOptions().DefaultVpc}}); err != nil {
		t.Fatal(err)
	}
	return &reconcilerEnv{c: c, nb: nb, st: st, rec: rec, subnets: &SubnetReconciler{Client: c, State: st, Recorder: rec, NB: nb},
		pods: &PodReconciler{Client: c, State: st, Recorder: rec}, ports: &PodPortReconciler{Client: c, State: st, NB: nb, Recorder: rec},
		nodes: &NodeReconciler{Client: c, State: st, NB: nb}}
}

func (e *reconcilerEnv) reconcileSubnet(t *testing.T, name string) {
	t.Helper()
	if _, err := e.subnets.Reconcile(context.Background(), ctrl.Request{NamespacedName: types.NamespacedName{Name: name}}); err != nil {
		t.Fatalf("reconcile subnet %s: %v", name, err)
	}
}

// events drains the recorder.
func (e *reconcilerEnv) events() []string {
	var out []string
	for {
		select {
		case ev := <-e.rec.Events:
			out = append(out, ev)
		default:
			return out
		}
	}
}

func subnetAt(name, cidr string, created time.Time) *kovnv1.Subnet {
	return &kovnv1.Subnet{ObjectMeta: metav1.ObjectMeta{Name: name, Generation: 1, CreationTimestamp: metav1.NewTime(created)},
		Spec: kovnv1.SubnetSpec{Vpc: DefaultOptions().DefaultVpc, CIDRBlock: cidr}}
}

func TestSubnetReconciler(t *testing.T) {
	o := DefaultOptions()
	e := newReconcilerEnv(t,
		subnetAt(o.DefaultSubnet, o.DefaultSubnetCIDR, created0),
		subnetAt(o.JoinSubnet, o.JoinCIDR, created0),
		subnetAt("late", "10.16.128.0/24", created0.Add(time.Hour)), // inside the default subnet, created later
		subnetAt("other", "10.17.0.0/24", created0.Add(time.Hour)),
	)
	// The younger overlapping subnet goes first: the order of events must not matter.
	for _, name := range []string{"late", o.DefaultSubnet, o.JoinSubnet, "other", "late"} {
		e.reconcileSubnet(t, name)
	}
	tests := []struct {
		name       string
		wantValid  bool
		reason     string
		msg        string // fragment of the Validated message
		wantV4Free int64
	}{
		{name: o.DefaultSubnet, wantValid: true, reason: kovnv1.ReasonValid, wantV4Free: 65533},
		{name: o.JoinSubnet, wantValid: true, reason: kovnv1.ReasonValid, wantV4Free: 65533},
		{name: "other", wantValid: true, reason: kovnv1.ReasonValid, wantV4Free: 253},
		{name: "late", wantValid: false, reason: kovnv1.ReasonOverlap, msg: "subnet " + o.DefaultSubnet},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var sn kovnv1.Subnet
			if err := e.c.Get(context.Background(), types.NamespacedName{Name: tc.name}, &sn); err != nil {
				t.Fatal(err)
			}
			val := meta.FindStatusCondition(sn.Status.Conditions, kovnv1.ConditionValidated)
			ready := meta.FindStatusCondition(sn.Status.Conditions, kovnv1.ConditionReady)
			if val == nil || ready == nil {
				t.Fatalf("conditions = %+v, want Validated and Ready", sn.Status.Conditions)
			}
			want := metav1.ConditionFalse
			if tc.wantValid {
				want = metav1.ConditionTrue
			}
			if val.Status != want || val.Reason != tc.reason || !strings.Contains(val.Message, tc.msg) {
				t.Errorf("Validated = %s/%s %q, want %s/%s containing %q", val.Status, val.Reason, val.Message, want, tc.reason, tc.msg)
			}
			if ready.Status != want {
				t.Errorf("Ready = %s (%s), want %s", ready.Status, ready.Message, want)
			}
			_, registered := e.st.Subnet(tc.name)
			_, uerr := e.st.IPAM.Usage(tc.name)
			if registered != tc.wantValid || (uerr == nil) != tc.wantValid {
				t.Errorf("in state: %v, IPAM usage error: %v; want registered = %v", registered, uerr, tc.wantValid)
			}
			if tc.wantValid && (sn.Status.V4AvailableIPs != tc.wantV4Free || sn.Status.ObservedGeneration != 1) {
				t.Errorf("status = %+v, want %d IPv4 addresses available and observedGeneration 1", sn.Status, tc.wantV4Free)
			}
			if !tc.wantValid && !errors.Is(uerr, ipam.ErrNoSubnet) {
				t.Errorf("IPAM usage error = %v, want ErrNoSubnet", uerr)
			}
		})
	}
	// One warning for the overlap, not one per reconcile.
	evs := e.events()
	if len(evs) != 1 || !strings.HasPrefix(evs[0], "Warning Overlap ") {
		t.Errorf("events = %q, want one Overlap warning", evs)
	}
}

func TestPodReconciler(t *testing.T) {
	pod := func(name, node string, ann map[string]string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns1", Name: name, Annotations: ann},
			Spec: corev1.PodSpec{NodeName: node}}
	}
	static := func(ip string) map[string]string { return map[string]string{annotation.IPAddress: ip} }
	tests := []struct {
		desc      string
		pods      []*corev1.Pod // reconciled in order; the last one is checked
		wantIP    string        // "" means any address of the default subnet
		wantMAC   string        // "" means any
		wantAlloc bool
		wantEvent string // reason of the last pod's only event
	}{
		{desc: "dynamic", pods: []*corev1.Pod{pod("a", "n1", nil)}, wantAlloc: true},
		{desc: "static IP and MAC", pods: []*corev1.Pod{pod("a", "n1", map[string]string{
			annotation.IPAddress: "10.16.0.50", annotation.MACAddress: "0A:58:0A:10:00:99"})},
			wantAlloc: true, wantIP: "10.16.0.50", wantMAC: "0a:58:0a:10:00:99"},
		{desc: "static IP taken by another pod", wantEvent: "IPConflict",
			pods: []*corev1.Pod{pod("a", "n1", static("10.16.0.50")), pod("b", "n1", static("10.16.0.50"))}},
		{desc: "malformed IP", pods: []*corev1.Pod{pod("a", "n1", static("10.16.0.999"))}, wantEvent: "InvalidNetworkRequest"},
		{desc: "two IPv4 addresses", pods: []*corev1.Pod{pod("a", "n1", static("10.16.0.5,10.16.0.6"))}, wantEvent: "InvalidNetworkRequest"},
		{desc: "multicast MAC", wantEvent: "InvalidNetworkRequest",
			pods: []*corev1.Pod{pod("a", "n1", map[string]string{annotation.MACAddress: "01:00:5e:00:00:01"})}},
		{desc: "unknown subnet", wantEvent: "InvalidNetworkRequest",
			pods: []*corev1.Pod{pod("a", "n1", map[string]string{annotation.LogicalSwitch: "nope"})}},
		{desc: "an attachment network's subnet as eth0", wantEvent: ReasonNetworkRequestDenied,
			pods: []*corev1.Pod{pod("a", "n1", map[string]string{annotation.LogicalSwitch: "att"})}},
		{desc: "not scheduled", pods: []*corev1.Pod{pod("a", "", nil)}},
		{desc: "host network", pods: []*corev1.Pod{func() *corev1.Pod { p := pod("a", "n1", nil); p.Spec.HostNetwork = true; return p }()}},
	}
	o := DefaultOptions()
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			att := subnetAt("att", "10.20.0.0/24", created0)
			att.Spec.Provider = "ns1/att"
			objs := []client.Object{subnetAt(o.DefaultSubnet, o.DefaultSubnetCIDR, created0), subnetAt(o.JoinSubnet, o.JoinCIDR, created0), att}
			for _, p := range tc.pods {
				objs = append(objs, p)
			}
			e := newReconcilerEnv(t, objs...)
			e.reconcileSubnet(t, o.DefaultSubnet)
			e.reconcileSubnet(t, o.JoinSubnet)
			e.reconcileSubnet(t, "att")
			ctx := context.Background()
			for _, p := range tc.pods {
				e.events()
				if _, err := e.pods.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(p)}); err != nil {
					t.Fatalf("reconcile pod %s: %v", p.Name, err)
				}
			}
			last := tc.pods[len(tc.pods)-1]
			evs := e.events()
			switch {
			case tc.wantEvent == "" && len(evs) > 0:
				t.Errorf("events = %q, want none", evs)
			case tc.wantEvent != "" && (len(evs) != 1 || !strings.HasPrefix(evs[0], "Warning "+tc.wantEvent+" ")):
				t.Errorf("events = %q, want one %s warning", evs, tc.wantEvent)
			}
			var got corev1.Pod
			if err := e.c.Get(ctx, client.ObjectKeyFromObject(last), &got); err != nil {
				t.Fatal(err)
			}
			var ip kovnv1.IP
			ipErr := e.c.Get(ctx, types.NamespacedName{Name: IPObjectName(last.Namespace, last.Name)}, &ip)
			if !tc.wantAlloc {
				if got.Annotations[annotation.Allocated] != "" || got.Annotations[annotation.CIDR] != "" {
					t.Errorf("annotations = %v, want no results", got.Annotations)
				}
				if !apierrors.IsNotFound(ipErr) {
					t.Errorf("IP object: %+v, %v; want none", ip, ipErr)
				}
				return
			}
			checkAllocated(t, &got, &ip, ipErr, tc.wantIP, tc.wantMAC)
		})
	}
}

func checkAllocated(t *testing.T, p *corev1.Pod, ip *kovnv1.IP, ipErr error, wantIP, wantMAC string) {
	t.Helper()
	a := p.Annotations
	addr, err := netip.ParseAddr(a[annotation.IPAddress])
	if err != nil || !netip.MustParsePrefix("10.16.0.0/16").Contains(addr) || (wantIP != "" && addr.String() != wantIP) {
		t.Errorf("ip_address = %q, want %s in 10.16.0.0/16", a[annotation.IPAddress], wantIP)
	}
	if a[annotation.Allocated] != "true" || a[annotation.CIDR] != "10.16.0.0/16" || a[annotation.Gateway] != "10.16.0.1" ||
		a[annotation.LogicalSwitch] != "ovn-default" || a[annotation.PortName] != p.Name+"."+p.Namespace ||
		(wantMAC != "" && a[annotation.MACAddress] != wantMAC) {
		t.Errorf("annotations = %v", a)
	}
	if ipErr != nil {
		t.Fatalf("IP object: %v", ipErr)
	}
	want := kovnv1.IPSpec{PodName: p.Name, Namespace: p.Namespace, Subnet: "ovn-default", NodeName: p.Spec.NodeName,
		V4IP: a[annotation.IPAddress], MACAddress: a[annotation.MACAddress]}
	if !reflect.DeepEqual(ip.Spec, want) || ip.Labels[contract.LabelSubnet] != "ovn-default" {
		t.Errorf("IP object = %+v labels %v, want spec %+v", ip.Spec, ip.Labels, want)
	}
}
