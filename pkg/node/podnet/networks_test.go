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

	kovnv1 "github.com/kovn/kovn/api/v1alpha1"
	"github.com/kovn/kovn/pkg/annotation"
	"github.com/kovn/kovn/pkg/cni"
	"github.com/kovn/kovn/pkg/hostnet"
)

func networksClient(t *testing.T, objs ...client.Object) client.Client {
	t.Helper()
	s := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(s)
	_ = kovnv1.AddToScheme(s)
	objs = append(objs, &kovnv1.Subnet{ObjectMeta: metav1.ObjectMeta{Name: "ovn-default"},
		Spec: kovnv1.SubnetSpec{CIDRBlock: "10.16.0.0/16,fd00:10:16::/64"}})
	return fake.NewClientBuilder().WithScheme(s).WithObjects(objs...).Build()
}

// The daemon plumbs what the controller recorded in the IP object, never what the pod's
// annotations say; until the IP object is this pod's on this node, it waits.
func TestPodNetworkFromIPObject(t *testing.T) {
	forged := map[string]string{annotation.Allocated: "true", annotation.IPAddress: "10.16.0.66", annotation.CIDR: "10.16.0.0/16",
		annotation.Gateway: "10.16.0.1", annotation.MACAddress: "0a:58:0a:10:00:66", annotation.PortName: "a.ns1"}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns1", Name: "a", UID: "u1", Annotations: forged},
		Spec: corev1.PodSpec{NodeName: "n1"}}
	ip := func(node string) *kovnv1.IP {
		return &kovnv1.IP{ObjectMeta: metav1.ObjectMeta{Name: "a.ns1"}, Spec: kovnv1.IPSpec{PodName: "a", Namespace: "ns1",
			Subnet: "ovn-default", NodeName: node, V4IP: "10.16.0.5", V6IP: "fd00:10:16::5", MACAddress: "0a:58:0a:10:00:05"}}
	}
	ctx := context.Background()
	p := &PodNetworks{Client: networksClient(t, pod, ip("n1")), NodeName: "n1", MTU: 1400}
	pn, err := p.WaitPodNetwork(ctx, "ns1", "a", "u1")
	if err != nil {
		t.Fatal(err)
	}
	if got := pn.MAC.String() + " " + pn.IPs[0].String() + " " + pn.IPs[1].String() + " " + pn.Gateways[0].String() + " " + pn.Gateways[1].String(); got != "0a:58:0a:10:00:05 10.16.0.5/16 fd00:10:16::5/64 10.16.0.1 fd00:10:16::1" || pn.PortName != "a.ns1" {
		t.Fatalf("pod network %q port %s, want the IP object's addresses", got, pn.PortName)
	}
	for desc, c := range map[string]client.Client{
		"no IP object (annotations forged)": networksClient(t, pod),
		"IP object of another node":         networksClient(t, pod, ip("n2")),
	} {
		p := &PodNetworks{Client: c, NodeName: "n1", Poll: 10 * time.Millisecond}
		tctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
		_, err := p.WaitPodNetwork(tctx, "ns1", "a", "u1")
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "a.ns1") {
			t.Errorf("%s: err %v, want to wait for the IP object", desc, err)
		}
	}
	p = &PodNetworks{Client: networksClient(t, pod, ip("n1")), NodeName: "n1"}
	if _, err := p.WaitPodNetwork(ctx, "ns1", "a", "other-uid"); !errors.Is(err, cni.ErrPodNotFound) {
		t.Errorf("uid mismatch: %v, want ErrPodNotFound", err)
	}
}

// TestPodNetworkIPv6Only: a pod of an IPv6-only subnet gets its IPv6 address with the subnet's
// prefix length and the IPv6 gateway (the first address unless the subnet names one), nothing
// of IPv4.
func TestPodNetworkIPv6Only(t *testing.T) {
	sn := &kovnv1.Subnet{ObjectMeta: metav1.ObjectMeta{Name: "v6"}, Spec: kovnv1.SubnetSpec{CIDRBlock: "fd00:20::/64"}}
	ip := &kovnv1.IP{ObjectMeta: metav1.ObjectMeta{Name: "a.ns1"}, Spec: kovnv1.IPSpec{PodName: "a", Namespace: "ns1",
		Subnet: "v6", NodeName: "n1", V6IP: "fd00:20::5", MACAddress: "0a:58:0a:10:00:05"}}
	pn, err := (&PodNetworks{NodeName: "n1"}).convert(ip, sn, "a.ns1")
	if err != nil {
		t.Fatal(err)
	}
	if len(pn.IPs) != 1 || pn.IPs[0].String() != "fd00:20::5/64" || len(pn.Gateways) != 1 || pn.Gateways[0].String() != "fd00:20::1" {
		t.Fatalf("IPv6-only pod network: IPs %v gateways %v, want fd00:20::5/64 via fd00:20::1", pn.IPs, pn.Gateways)
	}
	if err := pn.Validate(); err != nil {
		t.Fatalf("IPv6-only pod network does not validate: %v", err)
	}
}

type vlanReadiness map[string]error

func (v vlanReadiness) VlanReady(_ context.Context, vlan string) error { return v[vlan] }

// A pod of an underlay subnet gets its network only where the subnet's provider network is set
// up; elsewhere the CNI keeps saying why (until it is, or the runtime gives up).
func TestPodNetworkUnderlayNeedsProvider(t *testing.T) {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns1", Name: "u", UID: "u1"}, Spec: corev1.PodSpec{NodeName: "n1"}}
	ip := &kovnv1.IP{ObjectMeta: metav1.ObjectMeta{Name: "u.ns1"}, Spec: kovnv1.IPSpec{PodName: "u", Namespace: "ns1",
		Subnet: "ul100", NodeName: "n1", V4IP: "172.28.100.5", MACAddress: "0a:58:ac:1c:64:05"}}
	sn := &kovnv1.Subnet{ObjectMeta: metav1.ObjectMeta{Name: "ul100"}, Spec: kovnv1.SubnetSpec{CIDRBlock: "172.28.100.0/24", Vlan: "v100"}}
	c := networksClient(t, pod, ip, sn)
	// The underlay's own error, as pkg/underlay's VlanReady returns it (host networking's
	// sentinel): the CNI must read it as a definite refusal too.
	missing := fmt.Errorf("%w: provider network phys (vlan v100) is not ready on node n1: interface eth9 not found on node n1", hostnet.ErrInvalidConfig)
	p := &PodNetworks{Client: c, NodeName: "n1", Poll: 10 * time.Millisecond, Underlay: vlanReadiness{"v100": missing}}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := p.WaitPodNetwork(ctx, "ns1", "u", "u1"); !errors.Is(err, cni.ErrInvalidConfig) || errors.Is(err, context.DeadlineExceeded) ||
		!strings.Contains(err.Error(), "interface eth9 not found") {
		t.Fatalf("err %v, want the provider's reason at once", err)
	}
	p.Underlay = vlanReadiness{}
	pn, err := p.WaitPodNetwork(context.Background(), "ns1", "u", "u1")
	if err != nil || pn.Gateways[0].String() != "172.28.100.1" {
		t.Fatalf("pod network %+v %v, want the physical gateway 172.28.100.1", pn, err)
	}
}
