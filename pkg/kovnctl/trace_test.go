package kovnctl

import (
	"net/netip"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kovn/kovn/pkg/annotation"
)

func TestPacketFlows(t *testing.T) {
	p := Packet{Port: "a.default", Switch: "ovn-default", SrcMAC: "0a:58:0a:10:00:04", SrcIP: netip.MustParseAddr("10.16.0.4"),
		DstMAC: "0a:58:0a:10:00:01", DstIP: netip.MustParseAddr("10.96.0.10"), Proto: "udp", DstPort: 53}
	if got, want := p.Microflow(), `inport == "a.default" && eth.src == 0a:58:0a:10:00:04 && eth.dst == 0a:58:0a:10:00:01 && `+
		`ip4.src == 10.16.0.4 && ip4.dst == 10.96.0.10 && ip.ttl == 64 && udp.src == 40000 && udp.dst == 53`; got != want {
		t.Errorf("microflow:\n got %s\nwant %s", got, want)
	}
	if got, want := p.OpenFlow("abc_h"), "in_port=abc_h,udp,dl_src=0a:58:0a:10:00:04,dl_dst=0a:58:0a:10:00:01,nw_src=10.16.0.4,"+
		"nw_dst=10.96.0.10,nw_ttl=64,tp_src=40000,tp_dst=53"; got != want {
		t.Errorf("openflow:\n got %s\nwant %s", got, want)
	}
	p.SrcIP, p.DstIP, p.Proto = netip.MustParseAddr("fd00:10:16::4"), netip.MustParseAddr("fd00:10:16::5"), "icmp"
	if m := p.Microflow(); !strings.Contains(m, "ip6.dst == fd00:10:16::5") || !strings.Contains(m, "icmp6.type == 128") || strings.Contains(m, "icmp.dst") {
		t.Errorf("IPv6 echo microflow: %s", m)
	}
	if f := p.OpenFlow("abc_h"); !strings.Contains(f, ",icmp6,") || !strings.Contains(f, "ipv6_dst=fd00:10:16::5") || !strings.Contains(f, "icmpv6_type=128") {
		t.Errorf("IPv6 echo flow: %s", f)
	}
}

func TestVerdict(t *testing.T) {
	for _, tc := range []struct{ trace, want string }{
		// ovn-trace --summary, from the lab: a to b on another node, then with b's ingress denied.
		{`ingress(dp="ovn-default", inport="a.default") {
    outport = "b.default";
    output;
    egress(dp="ovn-default", inport="a.default", outport="b.default") {
        output;
        /* output to "b.default", type "" */;
    };
};`, "delivered to logical port b.default"},
		{`ingress(dp="ovn-default", inport="a.default") {
    outport = "b.default";
    output;
    egress(dp="ovn-default", inport="a.default", outport="b.default") {
        ct_commit { ct_mark.blocked = 1; };
    };
};`, "dropped on its way to logical port b.default"},
		{"ingress(dp=\"ovn-default\") { output(\"ovn-default-ovn-cluster\"); egress { output(\"b.default\"); } }", "delivered to logical port b.default"},
		{"ingress(dp=\"ovn-default\", inport=\"a.default\") {\n    next;\n};", "dropped before a logical port was chosen"},
	} {
		if got := Verdict(tc.trace); !strings.HasPrefix(got, tc.want) {
			t.Errorf("%q: %s, want %s", tc.trace, got, tc.want)
		}
	}
}

func TestPodEndOf(t *testing.T) {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "a", Annotations: map[string]string{
		annotation.Allocated: "true", annotation.PortName: "a.default", annotation.IPAddress: "10.16.0.4,fd00:10:16::4",
		annotation.Gateway: "10.16.0.1,fd00:10:16::1", annotation.CIDR: "10.16.0.0/16,fd00:10:16::/64",
		annotation.LogicalSwitch: "ovn-default", annotation.MACAddress: "0a:58:0a:10:00:04"}}, Spec: corev1.PodSpec{NodeName: "n1"}}
	end, err := PodEndOf(p)
	if err != nil || end.Port != "a.default" || len(end.IPs) != 2 || len(end.CIDRs) != 2 || end.Node != "n1" {
		t.Fatalf("%+v %v", end, err)
	}
	if gw, _ := ofFamily(end.Gateways, netip.MustParseAddr("fd00::9")); gw.String() != "fd00:10:16::1" {
		t.Errorf("IPv6 gateway: %s", gw)
	}
	delete(p.Annotations, annotation.Allocated)
	if _, err := PodEndOf(p); err == nil {
		t.Error("a pod kovn has not allocated yet: no error")
	}
}

func TestNodeChecks(t *testing.T) {
	healthy := NodeReading{Node: "n1", BrInt: true, OVNConn: "connected\n", Tunnels: 2, OtherNodes: 2,
		Ovn0Addrs: "ovn0 UNKNOWN 100.64.0.2/16 fd00:100:64::2/112\n", JoinIP: "100.64.0.2,fd00:100:64::2"}
	for _, c := range NodeChecks(healthy) {
		if !c.OK {
			t.Errorf("healthy node: %+v", c)
		}
	}
	sick := healthy
	sick.OVNConn, sick.Tunnels, sick.JoinIP = "not connected\n", 1, "100.64.0.2,fd00:100:64::9"
	failed := map[string]bool{}
	for _, c := range NodeChecks(sick) {
		if !c.OK {
			if c.Fix == "" {
				t.Errorf("%s failed without a fix", c.Check)
			}
			failed[c.Check] = true
		}
	}
	if len(failed) != 3 || !failed["ovn-controller connected to SB"] || !failed["geneve tunnels"] || !failed["ovn0 holds the join address"] {
		t.Errorf("failed checks %v, want ovn-controller, tunnels and ovn0", failed)
	}
	stopped := healthy
	stopped.OVNConn, stopped.OVNConnErr = "", "ovn-appctl: cannot read pidfile \"/var/run/ovn/ovn-controller.pid\""
	for _, c := range NodeChecks(stopped) {
		if c.Check == "ovn-controller connected to SB" && (c.OK || c.Detail != "ovn-controller is not running (no pidfile)") {
			t.Errorf("ovn-controller stopped: %+v", c)
		}
	}
	unread := healthy
	unread.OVSDBErr = "kovn-ovsdb: connecting to Open_vSwitch: connection refused"
	failed = map[string]bool{}
	for _, c := range NodeChecks(unread) {
		if !c.OK {
			failed[c.Check] = true
		}
	}
	if len(failed) != 2 || !failed["br-int exists"] || !failed["geneve tunnels"] {
		t.Errorf("OVS database unreadable: failed %v, want br-int and tunnels", failed)
	}
	if cs := NodeChecks(NodeReading{Node: "n2", NoOVSPod: true, NoOVSPodWhy: "no running kovn-ovs pod"}); len(cs) != 1 || cs[0].OK {
		t.Errorf("no OVS pod: %+v", cs)
	}
}
