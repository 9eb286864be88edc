package cni

import (
	"context"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/vishvananda/netlink"

	"github.com/kovn/kovn/pkg/hostnet"
	"github.com/kovn/kovn/pkg/netattach"
)

// delegateBinDir holds Debian's containernetworking-plugins (make deps installs them).
const delegateBinDir = "/usr/lib/cni"

// fakeStatus records what the handler publishes as network-status.
type fakeStatus struct{ got []netattach.NetworkStatus }

func (f *fakeStatus) SetNetworkStatus(_ context.Context, _, _, _ string, st []netattach.NetworkStatus) error {
	f.got = st
	return nil
}

// attachmentRig is newRig with a pod asking for net1 (a kovn port whose IPv4 default route
// replaces eth0's) and net2 (macvlan on the node's ul0, kovn's address as static IPAM).
func attachmentRig(t *testing.T, master string) (*rig, *fakeStatus) {
	t.Helper()
	for _, p := range []string{"macvlan", "static"} {
		if _, err := os.Stat(filepath.Join(delegateBinDir, p)); err != nil {
			t.Fatalf("delegate plugin missing (run make deps: containernetworking-plugins): %v", err)
		}
	}
	r := newRig(t)
	r.db.fakeOVNController(t, func(string) bool { return true })
	if err := hostnet.WithNetNS(r.nodeNS, func() error {
		return netlink.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "ul0"}, PeerName: "ul0p"}) // no dummy links in the lab's kernel
	}); err != nil {
		t.Fatal(err)
	}
	st := &fakeStatus{}
	r.handler.CNIBinDir, r.handler.StateDir, r.handler.Status = delegateBinDir, t.TempDir(), st
	r.networks.pn.Attachments = []Attachment{
		{IfName: "net1", Network: "default/blue", Port: &PodNetwork{
			IPs:      []netip.Prefix{netip.MustParsePrefix("192.168.50.5/24"), netip.MustParsePrefix("fd00:50::5/64")},
			Gateways: []netip.Addr{netip.MustParseAddr("192.168.50.1")},
			MAC:      net.HardwareAddr{0x0a, 0x58, 0xc0, 0xa8, 0x32, 0x05}, PortName: "web-0.default.net1"}},
		{IfName: "net2", Network: "default/mv", Plugin: "macvlan", MAC: net.HardwareAddr{0x0a, 0x58, 0xc0, 0xa8, 0x3c, 0x07},
			Config: []byte(`{"cniVersion":"1.0.0","name":"mv","type":"macvlan","master":"` + master + `","mode":"bridge",` +
				`"ipam":{"type":"static","addresses":[{"address":"192.168.60.7/24"}]}}`)},
	}
	return r, st
}

func TestPodHandlerAttachments(t *testing.T) {
	r, st := attachmentRig(t, "ul0")
	ctx := context.Background()
	if _, err := r.handler.Add(ctx, r.request(CmdAdd)); err != nil {
		t.Fatalf("ADD: %v", err)
	}
	net1 := inspect(t, r.podNS, "net1")
	if net1.lookupErr != nil || !hasAddrText(net1.addrs, "192.168.50.5/24") || !hasAddrText(net1.addrs, "fd00:50::5/64") {
		t.Fatalf("pod's net1: %v, addresses %v", net1.lookupErr, net1.addrs)
	}
	if gw := defaultVia(net1.routes, false); gw != "192.168.50.1" {
		t.Errorf("net1's IPv4 default route via %q, want 192.168.50.1 (default-route)", gw)
	}
	if eth0 := inspect(t, r.podNS, "eth0"); defaultVia(eth0.routes, false) != "" || defaultVia(eth0.routes, true) != "fd00:10:16::1" {
		t.Errorf("eth0 keeps an IPv4 default route or lost its IPv6 one: %v", eth0.routes)
	}
	// CHECK reads eth0 as ADD left it: without the default route net1 took.
	if err := r.handler.Check(ctx, r.request(CmdCheck)); err != nil {
		t.Errorf("CHECK after ADD: %v", err)
	}
	net2 := inspect(t, r.podNS, "net2")
	if net2.lookupErr != nil || net2.link.Type() != "macvlan" || !hasAddrText(net2.addrs, "192.168.60.7/24") || net2.link.Attrs().HardwareAddr.String() != "0a:58:c0:a8:3c:07" {
		t.Fatalf("pod's net2: %v, %v", net2.lookupErr, net2)
	}
	hostIf := AttachmentHostIfName(testContainerID, "net1")
	var ids []string
	for _, i := range r.db.ifaces(t) {
		ids = append(ids, i.Name+" "+i.ExternalIDs[ExtIDIfaceID]+" "+i.ExternalIDs[ExtIDInterface]+" "+i.ExternalIDs[ExtIDPodName])
	}
	slices.Sort(ids)
	if want := []string{HostIfName(testContainerID) + " web-0.default  web-0", hostIf + " web-0.default.net1 net1 web-0"}; !slices.Equal(ids, want) {
		t.Errorf("OVS interfaces (name iface-id interface pod):\n%s\nwant\n%s", strings.Join(ids, "\n"), strings.Join(want, "\n"))
	}
	want := []string{"kovn eth0 10.16.0.5,fd00:10:16::5 default", "default/blue net1 192.168.50.5,fd00:50::5", "default/mv net2 192.168.60.7"}
	if got := statusLines(st.got); !slices.Equal(got, want) {
		t.Errorf("network-status:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}

	if err := r.handler.Del(ctx, r.request(CmdDel)); err != nil {
		t.Fatalf("DEL: %v", err)
	}
	for _, ifName := range []string{"eth0", "net1", "net2"} {
		if v := inspect(t, r.podNS, ifName); v.lookupErr == nil {
			t.Errorf("pod's %s left after DEL", ifName)
		}
	}
	if v := inspect(t, r.nodeNS, hostIf); v.lookupErr == nil {
		t.Errorf("node-side %s left after DEL", hostIf)
	}
	if n := len(r.db.ports(t)); n != 0 {
		t.Errorf("%d OVS ports left after DEL", n)
	}
	if left, _ := filepath.Glob(filepath.Join(r.handler.StateDir, "attachments", "*")); len(left) != 0 {
		t.Errorf("attachment records left after DEL: %v", left)
	}
}

// TestPodHandlerAttachmentRollback: the delegate fails (its master does not exist), so net1,
// made before it, and eth0 are taken back: no interface, port or record is left.
func TestPodHandlerAttachmentRollback(t *testing.T) {
	r, st := attachmentRig(t, "missing0")
	_, err := r.handler.Add(context.Background(), r.request(CmdAdd))
	if err == nil || !strings.Contains(err.Error(), "default/mv (net2)") {
		t.Fatalf("ADD with a failing delegate = %v, want an error naming default/mv (net2)", err)
	}
	for _, ifName := range []string{"eth0", "net1", "net2"} {
		if v := inspect(t, r.podNS, ifName); v.lookupErr == nil {
			t.Errorf("pod's %s left by a failed ADD", ifName)
		}
	}
	for _, hostIf := range []string{HostIfName(testContainerID), AttachmentHostIfName(testContainerID, "net1")} {
		if v := inspect(t, r.nodeNS, hostIf); v.lookupErr == nil {
			t.Errorf("node-side %s left by a failed ADD", hostIf)
		}
	}
	if n := len(r.db.ports(t)) + len(r.db.ifaces(t)); n != 0 {
		t.Errorf("%d OVS rows left by a failed ADD", n)
	}
	if left, _ := filepath.Glob(filepath.Join(r.handler.StateDir, "attachments", "*")); len(left) != 0 {
		t.Errorf("attachment records left by a failed ADD: %v", left)
	}
	if st.got != nil {
		t.Errorf("a failed ADD published network-status %v", st.got)
	}
}

func TestAttachmentValidation(t *testing.T) {
	port := dualStack()
	port.PortName = "web-0.default.net1"
	for _, tc := range []struct {
		desc string
		a    Attachment
		ok   bool
	}{
		{"kovn port", Attachment{IfName: "net1", Network: "a/b", Port: port}, true},
		{"delegate", Attachment{IfName: "net1", Network: "a/b", Plugin: "macvlan", Config: []byte(`{}`)}, true},
		{"eth0 again", Attachment{IfName: "eth0", Network: "a/b", Port: port}, false},
		{"name too long", Attachment{IfName: "net1234567890123", Network: "a/b", Port: port}, false},
		{"plugin path", Attachment{IfName: "net1", Network: "a/b", Plugin: "../../bin/sh", Config: []byte(`{}`)}, false},
		{"both", Attachment{IfName: "net1", Network: "a/b", Port: port, Plugin: "macvlan", Config: []byte(`{}`)}, false},
		{"config not JSON", Attachment{IfName: "net1", Network: "a/b", Plugin: "macvlan", Config: []byte(`{`)}, false},
	} {
		pn := dualStack()
		pn.Attachments = []Attachment{tc.a}
		if err := pn.validateAttachments("eth0"); (err == nil) != tc.ok {
			t.Errorf("%s: validateAttachments = %v, want ok %v", tc.desc, err, tc.ok)
		}
	}
}

func hasAddrText(addrs []netlink.Addr, want string) bool {
	for _, a := range addrs {
		if a.IPNet.String() == want {
			return true
		}
	}
	return false
}

// defaultVia is the gateway of routes' default route of a family ("" without one).
func defaultVia(routes []netlink.Route, v6 bool) string {
	for _, r := range routes {
		if (r.Dst == nil || r.Dst.IP.IsUnspecified()) && r.Gw != nil && (r.Gw.To4() == nil) == v6 {
			if ones, _ := maskOnes(r.Dst); ones == 0 {
				return r.Gw.String()
			}
		}
	}
	return ""
}

func maskOnes(n *net.IPNet) (int, int) {
	if n == nil {
		return 0, 0
	}
	return n.Mask.Size()
}

func statusLines(st []netattach.NetworkStatus) []string {
	var out []string
	for _, s := range st {
		l := s.Name + " " + s.Interface + " " + strings.Join(s.IPs, ",")
		if s.Default {
			l += " default"
		}
		out = append(out, l)
	}
	return out
}
