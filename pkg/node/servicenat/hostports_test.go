package servicenat

import (
	"context"
	"net/netip"
	"os/exec"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	kovnv1 "github.com/kovn/kovn/api/v1alpha1"
	"github.com/kovn/kovn/pkg/hostnet/netnstest"
)

var (
	dualPod = addrList("10.16.0.5", "fd00:10:16::5")
	hpTCP   = HostPortMapping{Key: "ns/tcp", Protocol: "TCP", HostPort: 8080, ContainerPort: 8080, PodIPs: dualPod}
	hpUDP   = HostPortMapping{Key: "ns/udp", Protocol: "UDP", HostPort: 8080, ContainerPort: 9001, PodIPs: addrList("10.16.0.6", "fd00:10:16::6")}
	hpOnV4  = HostPortMapping{Key: "ns/one", Protocol: "TCP", HostIP: netip.MustParseAddr("172.18.0.2"), HostPort: 8081, ContainerPort: 8080,
		PodIPs: addrList("10.16.0.7", "fd00:10:16::7")}
	hpOnV6 = HostPortMapping{Key: "ns/six", Protocol: "TCP", HostIP: netip.MustParseAddr("fc00:f853::2"), HostPort: 8081, ContainerPort: 8080,
		PodIPs: addrList("10.16.0.8", "fd00:10:16::8")}
)

// TestHostPortRules: one hostPort on two protocols goes to two pods, a specific hostIP only
// in its own family and before wildcards; every translation is marked for masquerade.
func TestHostPortRules(t *testing.T) {
	all := []HostPortMapping{hpUDP, hpTCP, hpOnV6, hpOnV4}
	v4 := HostPortRules(true, all, nil)
	want4 := `*nat
:KOVN-HOSTPORTS - [0:0]
:KOVN-HOSTPORT-MASQ - [0:0]
-A KOVN-HOSTPORT-MASQ -m mark --mark 0x4000/0x4000 -j MASQUERADE
-A KOVN-HOSTPORTS -d 172.18.0.2/32 -m addrtype --dst-type LOCAL -p tcp -m tcp --dport 8081 -m comment --comment "ns/one:8080/TCP" -j MARK --set-xmark 0x4000/0x4000
-A KOVN-HOSTPORTS -d 172.18.0.2/32 -m addrtype --dst-type LOCAL -p tcp -m tcp --dport 8081 -m comment --comment "ns/one:8080/TCP" -j DNAT --to-destination 10.16.0.7:8080
-A KOVN-HOSTPORTS ! -d 127.0.0.0/8 -m addrtype --dst-type LOCAL -p tcp -m tcp --dport 8080 -m comment --comment "ns/tcp:8080/TCP" -j MARK --set-xmark 0x4000/0x4000
-A KOVN-HOSTPORTS ! -d 127.0.0.0/8 -m addrtype --dst-type LOCAL -p tcp -m tcp --dport 8080 -m comment --comment "ns/tcp:8080/TCP" -j DNAT --to-destination 10.16.0.5:8080
-A KOVN-HOSTPORTS ! -d 127.0.0.0/8 -m addrtype --dst-type LOCAL -p udp -m udp --dport 8080 -m comment --comment "ns/udp:9001/UDP" -j MARK --set-xmark 0x4000/0x4000
-A KOVN-HOSTPORTS ! -d 127.0.0.0/8 -m addrtype --dst-type LOCAL -p udp -m udp --dport 8080 -m comment --comment "ns/udp:9001/UDP" -j DNAT --to-destination 10.16.0.6:9001
COMMIT
`
	if v4 != want4 {
		t.Errorf("IPv4 rules:\n%s\nwant:\n%s", v4, want4)
	}
	v6 := HostPortRules(false, all, nil)
	for _, want := range []string{
		`-A KOVN-HOSTPORTS -d fc00:f853::2/128 -m addrtype --dst-type LOCAL -p tcp -m tcp --dport 8081 -m comment --comment "ns/six:8080/TCP" -j DNAT --to-destination [fd00:10:16::8]:8080`,
		`-A KOVN-HOSTPORTS ! -d ::1/128 -m addrtype --dst-type LOCAL -p udp -m udp --dport 8080 -m comment --comment "ns/udp:9001/UDP" -j DNAT --to-destination [fd00:10:16::6]:9001`,
	} {
		if !strings.Contains(v6, want+"\n") {
			t.Errorf("IPv6 rules lack %q:\n%s", want, v6)
		}
	}
	if strings.Contains(v6, "ns/one") || strings.Contains(v4, "ns/six") {
		t.Errorf("a hostIP published in the other family:\n%s\n%s", v4, v6)
	}
	v4only := HostPortMapping{Key: "ns/v4", Protocol: "TCP", HostPort: 80, ContainerPort: 80, PodIPs: addrList("10.16.0.9")}
	if v6 := HostPortRules(false, []HostPortMapping{v4only}, nil); strings.Contains(v6, "ns/v4") {
		t.Errorf("an IPv4-only pod has IPv6 rules:\n%s", v6)
	}
	if again := HostPortRules(true, []HostPortMapping{hpOnV4, hpTCP, hpOnV6, hpUDP}, nil); again != v4 {
		t.Errorf("the order of the input changes the rules:\n%s", again)
	}
}

func hostPortPod(name, node string, hostNetwork bool, ports ...corev1.ContainerPort) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name},
		Spec: corev1.PodSpec{NodeName: node, HostNetwork: hostNetwork, Containers: []corev1.Container{{Name: "c", Ports: ports}}}}
}

func hostPortIP(pod, node, subnet, v4 string) *kovnv1.IP {
	return &kovnv1.IP{ObjectMeta: metav1.ObjectMeta{Name: pod + ".ns"}, Spec: kovnv1.IPSpec{PodName: pod, Namespace: "ns",
		Subnet: subnet, NodeName: node, V4IP: v4}}
}

func validSubnet(name, vpc string) *kovnv1.Subnet {
	return &kovnv1.Subnet{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: kovnv1.SubnetSpec{Vpc: vpc},
		Status: kovnv1.SubnetStatus{Conditions: []metav1.Condition{{Type: kovnv1.ConditionValidated, Status: metav1.ConditionTrue}}}}
}

// TestHostPortReconciler: only pods of this node's pod network with an IP object the
// controller recorded for them on this node are published, at that address; a pod's
// deletion takes its rules away.
func TestHostPortReconciler(t *testing.T) {
	s := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(s)
	_ = kovnv1.AddToScheme(s)
	hp := func(port int32) corev1.ContainerPort {
		return corev1.ContainerPort{ContainerPort: 8080, HostPort: port}
	}
	objs := []client.Object{
		validSubnet("join", ""), validSubnet("ovn-default", ""), validSubnet("tenant", "vpc1"),
		hostPortPod("web", "n1", false, hp(8080), corev1.ContainerPort{ContainerPort: 9001, HostPort: 8080, Protocol: corev1.ProtocolUDP},
			corev1.ContainerPort{ContainerPort: 80}), hostPortIP("web", "n1", "ovn-default", "10.16.0.5"),
		hostPortPod("vpc", "n1", false, hp(8082)), hostPortIP("vpc", "n1", "tenant", "10.16.0.5"),
		hostPortPod("stale", "n1", false, hp(8083)), hostPortIP("stale", "n2", "ovn-default", "10.16.0.9"),
		hostPortPod("noip", "n1", false, hp(8084)),
		hostPortPod("host", "n1", true, hp(8085)),
		hostPortPod("forged", "n1", false, corev1.ContainerPort{ContainerPort: 8080, HostPort: 8086, HostIP: "not-an-ip"}),
		hostPortIP("forged", "n1", "ovn-default", "10.16.0.10"),
	}
	c := fake.NewClientBuilder().WithScheme(s).WithObjects(objs...).Build()
	got := map[bool]string{}
	r := &HostPortReconciler{Client: c, NodeName: "n1", JoinSubnet: "join",
		Apply: func(is4 bool, rules string) error { got[is4] = rules; return nil }}
	ctx := context.Background()
	if _, err := r.Reconcile(ctx, ctrl.Request{}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"-p tcp -m tcp --dport 8080 -m comment --comment \"ns/web:8080/TCP\" -j DNAT --to-destination 10.16.0.5:8080\n",
		"-p udp -m udp --dport 8080 -m comment --comment \"ns/web:9001/UDP\" -j DNAT --to-destination 10.16.0.5:9001\n"} {
		if !strings.Contains(got[true], want) {
			t.Errorf("rules lack %q:\n%s", want, got[true])
		}
	}
	if n := strings.Count(got[true], "-j DNAT"); n != 2 {
		t.Errorf("want only web's two hostPorts (not a custom VPC's pod, one whose IP object is another node's, one without IP object, a hostNetwork pod, nor a bad hostIP), got %d:\n%s", n, got[true])
	}
	if err := c.Delete(ctx, objs[3]); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Reconcile(ctx, ctrl.Request{}); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(got[true], "DNAT") || !strings.Contains(got[true], ":KOVN-HOSTPORTS - [0:0]") {
		t.Errorf("after the pod's deletion:\n%s", got[true])
	}
}

// TestHostPortRulesApply: the rules load into a real packet filter (in a throwaway netns), a
// rewrite replaces them, and the jumps are made once.
func TestHostPortRulesApply(t *testing.T) {
	netnstest.Do(t, func() {
		for _, is4 := range []bool{true, false} {
			tool := map[bool]string{true: "iptables", false: "ip6tables"}[is4]
			for _, maps := range [][]HostPortMapping{{hpTCP, hpUDP, hpOnV4, hpOnV6}, {hpTCP}} {
				if err := ApplyHostPortRules(is4, HostPortRules(is4, maps, nil)); err != nil {
					t.Fatal(err)
				}
			}
			out, err := exec.Command(tool, "-t", "nat", "-S").CombinedOutput()
			if err != nil {
				t.Fatalf("%s -S: %v %s", tool, err, out)
			}
			s := string(out)
			if strings.Count(s, "-j KOVN-HOSTPORTS") != 2 || strings.Count(s, "-j KOVN-HOSTPORT-MASQ") != 1 ||
				strings.Count(s, "ns/tcp") != 2 || strings.Contains(s, "ns/udp") || strings.Contains(s, "8081") {
				t.Fatalf("%s after two syncs (the second with ns/tcp only):\n%s", tool, s)
			}
		}
	})
}

// TestPodHostPorts: hostIP "" and 0.0.0.0 publish on every address of both families, "::" on
// every IPv6 address only; a port without hostPort is not published; the protocol defaults
// to TCP.
func TestPodHostPorts(t *testing.T) {
	pod := hostPortPod("p", "n1", false, corev1.ContainerPort{ContainerPort: 80, HostPort: 8080},
		corev1.ContainerPort{ContainerPort: 81, HostPort: 8081, HostIP: "0.0.0.0", Protocol: corev1.ProtocolUDP},
		corev1.ContainerPort{ContainerPort: 82, HostPort: 8082, HostIP: "::", Protocol: corev1.ProtocolSCTP},
		corev1.ContainerPort{ContainerPort: 83})
	maps := podHostPorts(pod, dualPod)
	if len(maps) != 3 || maps[0].Protocol != "TCP" || maps[0].HostIP.IsValid() || maps[1].HostIP.IsValid() || maps[2].HostIP != netip.IPv6Unspecified() {
		t.Fatalf("mappings %+v", maps)
	}
	v4, v6 := HostPortRules(true, maps, nil), HostPortRules(false, maps, nil)
	if !strings.Contains(v4, "--dport 8081") || strings.Contains(v4, "--dport 8082") ||
		!strings.Contains(v6, `! -d ::1/128 -m addrtype --dst-type LOCAL -p sctp -m sctp --dport 8082 -m comment --comment "ns/p:82/SCTP" -j DNAT --to-destination [fd00:10:16::5]:82`) {
		t.Errorf("rules:\n%s\n%s", v4, v6)
	}
}
