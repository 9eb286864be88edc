package podnet

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	nadv1 "github.com/kovn/kovn/api/nad/v1"
	kovnv1 "github.com/kovn/kovn/api/v1alpha1"
	"github.com/kovn/kovn/pkg/cni"
	"github.com/kovn/kovn/pkg/netattach"
)

// attachmentWorld is a cluster as the daemon reads it: pod ns1/a on n1 with eth0 recorded,
// definitions blue (kovn) and mv (macvlan with kovn IPAM) in ns1, red (kovn) in shared
// namespace "lab" and in unshared "other", their Subnets, and the attachment records.
func attachmentWorld(t *testing.T, networks string, extra ...client.Object) client.Client {
	t.Helper()
	s := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(s)
	_ = kovnv1.AddToScheme(s)
	_ = nadv1.AddToScheme(s)
	nad := func(ns, name, config string) *nadv1.NetworkAttachmentDefinition {
		return &nadv1.NetworkAttachmentDefinition{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: nadv1.NetworkAttachmentDefinitionSpec{Config: config}}
	}
	subnet := func(name, cidr, provider string) *kovnv1.Subnet {
		return &kovnv1.Subnet{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: kovnv1.SubnetSpec{CIDRBlock: cidr, Provider: provider}}
	}
	ip := func(iface, network, subnet, addr string) *kovnv1.IP {
		return &kovnv1.IP{ObjectMeta: metav1.ObjectMeta{Name: "a.ns1." + iface}, Spec: kovnv1.IPSpec{PodName: "a", Namespace: "ns1",
			Subnet: subnet, NodeName: "n1", V4IP: addr, MACAddress: "0a:58:c0:a8:00:05", Network: network, Interface: iface}}
	}
	objs := []client.Object{
		&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns1", Name: "a", UID: "u1",
			Annotations: map[string]string{netattach.NetworksAnnotation: networks}}, Spec: corev1.PodSpec{NodeName: "n1"}},
		&kovnv1.IP{ObjectMeta: metav1.ObjectMeta{Name: "a.ns1"}, Spec: kovnv1.IPSpec{PodName: "a", Namespace: "ns1",
			Subnet: "ovn-default", NodeName: "n1", V4IP: "10.16.0.5", MACAddress: "0a:58:0a:10:00:05"}},
		subnet("ovn-default", "10.16.0.0/16", ""),
		subnet("blue", "192.168.50.0/24", "ns1/blue"), subnet("mv", "192.168.60.0/24", "ns1/mv"),
		subnet("red", "192.168.70.0/24", "lab/red"),
		nad("ns1", "blue", `{"cniVersion":"1.0.0","type":"kovn"}`),
		nad("ns1", "mv", `{"cniVersion":"1.0.0","type":"macvlan","master":"eth1","ipam":{"type":"kovn"}}`),
		nad("ns1", "broken", `{"cniVersion":"1.0.0","type":`),
		nad("lab", "red", `{"cniVersion":"1.0.0","type":"kovn"}`), nad("other", "red", `{"cniVersion":"1.0.0","type":"kovn"}`),
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "lab", Annotations: map[string]string{netattach.SharedNetworksAnnotation: "true"}}},
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "other"}},
		ip("net1", "ns1/blue", "blue", "192.168.50.5"), ip("net2", "ns1/mv", "mv", "192.168.60.7"),
		ip("red0", "lab/red", "red", "192.168.70.9"),
	}
	return fake.NewClientBuilder().WithScheme(s).WithObjects(append(objs, extra...)...).Build()
}

func TestPodAttachments(t *testing.T) {
	c := attachmentWorld(t, `[{"name":"blue","interface":"net1","default-route":["192.168.50.1"]},{"name":"mv","interface":"net2","mac":"0a:58:00:00:00:42"},{"namespace":"lab","name":"red","interface":"red0"}]`)
	p := &PodNetworks{Client: c, Live: c, NodeName: "n1", Delegates: testDelegates}
	pn, err := p.WaitPodNetwork(context.Background(), "ns1", "a", "u1")
	if err != nil {
		t.Fatal(err)
	}
	if len(pn.Attachments) != 3 {
		t.Fatalf("%d attachments, want 3: %+v", len(pn.Attachments), pn.Attachments)
	}
	net1, net2, red := pn.Attachments[0], pn.Attachments[1], pn.Attachments[2]
	if net1.IfName != "net1" || net1.Port == nil || net1.Port.PortName != "a.ns1.net1" || net1.Port.IPs[0].String() != "192.168.50.5/24" ||
		len(net1.Port.Gateways) != 1 || net1.Port.Gateways[0].String() != "192.168.50.1" {
		t.Errorf("net1 = %+v (port %+v), want a kovn port a.ns1.net1 with 192.168.50.5/24 and default route via 192.168.50.1", net1, net1.Port)
	}
	if net2.Port != nil || net2.Plugin != "macvlan" || !strings.Contains(string(net2.Config), `"ipam":{"addresses":[{"address":"192.168.60.7/24"}],"type":"static"}`) ||
		net2.MAC.String() != "0a:58:00:00:00:42" {
		t.Errorf("net2 = %s %s %s, want macvlan with kovn's 192.168.60.7/24 as static IPAM and the requested MAC", net2.Plugin, net2.Config, net2.MAC)
	}
	if red.Network != "lab/red" || red.Port == nil || len(red.Port.Gateways) != 0 {
		t.Errorf("red0 = %+v, want lab/red's kovn port without a default route", red)
	}
}

// A refusal fails at once with ErrInvalidConfig (the pod gets no interface, its event says
// why); a record not written yet is waited for.
func TestPodAttachmentsRefused(t *testing.T) {
	for _, tc := range []struct {
		desc, networks string
		extra          []client.Object
		noLive         bool
		want           string // "" waits
	}{
		{desc: "namespace not shared", networks: "other/red", want: "other"},
		{desc: "definition missing", networks: "nosuch", want: "no such NetworkAttachmentDefinition"},
		{desc: "definition not JSON", networks: "broken", want: "not JSON"},
		{desc: "definition not JSON after one awaiting its record", networks: `[{"name":"blue","interface":"net9"},{"name":"broken"}]`, want: "not JSON"},
		{desc: "annotation malformed", networks: `[{"name":"blue","interface":"eth0"}]`, want: "eth0"},
		{desc: "default-route on a delegate", networks: `[{"name":"mv","default-route":["192.168.60.1"]}]`, want: "default-route"},
		{desc: "daemon without API reader", networks: "blue", noLive: true, want: "does not serve attachment networks"},
		{desc: "no record yet", networks: `[{"name":"blue","interface":"net9"}]`},
		{desc: "record of another network", networks: `[{"name":"mv","interface":"net1"}]`},
	} {
		c := attachmentWorld(t, tc.networks, tc.extra...)
		p := &PodNetworks{Client: c, Live: c, NodeName: "n1", Poll: 10 * time.Millisecond, Delegates: testDelegates}
		if tc.noLive {
			p.Live = nil
		}
		ctx, cancel := context.WithTimeout(context.Background(), 150*time.Millisecond)
		_, err := p.WaitPodNetwork(ctx, "ns1", "a", "u1")
		cancel()
		switch {
		case tc.want == "" && !errors.Is(err, context.DeadlineExceeded):
			t.Errorf("%s: %v, want to wait for kovn-controller's record", tc.desc, err)
		case tc.want != "" && (!errors.Is(err, cni.ErrInvalidConfig) || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: %v, want ErrInvalidConfig naming %q", tc.desc, err, tc.want)
		}
	}
}

// countingReader counts the reads that reach the API server.
type countingReader struct {
	client.Reader
	gets int
}

func (c *countingReader) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	c.gets++
	return c.Reader.Get(ctx, key, obj, opts...)
}

// A wait for a record reads each definition once, not at every poll.
func TestPodAttachmentsReadDefinitionsOnce(t *testing.T) {
	c := attachmentWorld(t, `[{"name":"blue","interface":"net9"}]`)
	live := &countingReader{Reader: c}
	p := &PodNetworks{Client: c, Live: live, NodeName: "n1", Poll: 5 * time.Millisecond, Delegates: testDelegates}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if _, err := p.WaitPodNetwork(ctx, "ns1", "a", "u1"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("%v, want to wait", err)
	}
	if live.gets != 1 {
		t.Errorf("%d API reads during one wait, want 1 (the definition, once)", live.gets)
	}
}

// An underlay Subnet as an attachment needs its provider network on this node, as eth0 does.
func TestPodAttachmentUnderlayNeedsProvider(t *testing.T) {
	sn := &kovnv1.Subnet{ObjectMeta: metav1.ObjectMeta{Name: "ulblue"}, Spec: kovnv1.SubnetSpec{CIDRBlock: "172.28.100.0/24", Vlan: "v100", Provider: "ns1/ulblue"}}
	nad := &nadv1.NetworkAttachmentDefinition{ObjectMeta: metav1.ObjectMeta{Namespace: "ns1", Name: "ulblue"},
		Spec: nadv1.NetworkAttachmentDefinitionSpec{Config: `{"cniVersion":"1.0.0","type":"kovn"}`}}
	ip := &kovnv1.IP{ObjectMeta: metav1.ObjectMeta{Name: "a.ns1.net1"}, Spec: kovnv1.IPSpec{PodName: "a", Namespace: "ns1",
		Subnet: "ulblue", NodeName: "n1", V4IP: "172.28.100.5", MACAddress: "0a:58:ac:1c:64:05", Network: "ns1/ulblue", Interface: "net1"}}
	c := attachmentWorld(t, "ulblue", sn, nad)
	_ = c.Delete(context.Background(), &kovnv1.IP{ObjectMeta: metav1.ObjectMeta{Name: "a.ns1.net1"}})
	if err := c.Create(context.Background(), ip); err != nil {
		t.Fatal(err)
	}
	missing := fmt.Errorf("%w: provider network phys (vlan v100) is not ready on node n1: interface eth9 not found on node n1", cni.ErrInvalidConfig)
	p := &PodNetworks{Client: c, Live: c, NodeName: "n1", Poll: 10 * time.Millisecond, Underlay: vlanReadiness{"v100": missing}}
	if _, err := p.WaitPodNetwork(context.Background(), "ns1", "a", "u1"); !errors.Is(err, cni.ErrInvalidConfig) || !strings.Contains(err.Error(), "eth9") {
		t.Fatalf("err %v, want the provider's reason at once", err)
	}
	p.Underlay = vlanReadiness{}
	pn, err := p.WaitPodNetwork(context.Background(), "ns1", "a", "u1")
	if err != nil || len(pn.Attachments) != 1 || pn.Attachments[0].Port.IPs[0].String() != "172.28.100.5/24" {
		t.Fatalf("pod network %+v %v, want net1 on ulblue", pn, err)
	}
}

// With IgnoreAttachments (a meta-plugin serves the annotation), the pod gets eth0 only, at
// once, without reading a definition or awaiting an attachment record.
func TestPodAttachmentsIgnored(t *testing.T) {
	c := attachmentWorld(t, `[{"name":"blue","interface":"net9"}]`)
	live := &countingReader{Reader: c}
	p := &PodNetworks{Client: c, Live: live, NodeName: "n1", Poll: 5 * time.Millisecond, IgnoreAttachments: true}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	pn, err := p.WaitPodNetwork(ctx, "ns1", "a", "u1")
	if err != nil || len(pn.Attachments) != 0 || live.gets != 0 {
		t.Fatalf("pod network %+v, %v, %d definition reads: want eth0 alone, no read", pn, err, live.gets)
	}
}

// testDelegates allows the default delegate types on the node interface eth1.
var testDelegates = netattach.AllowingHostInterfaces("eth1")
