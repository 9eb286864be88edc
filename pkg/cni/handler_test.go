package cni

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"
	"github.com/go-logr/logr/testr"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/kovn/kovn/pkg/hostnet"
	"github.com/kovn/kovn/pkg/hostnet/netnstest"
)

// fakeNetworks answers WaitPodNetwork with a copy of pn, or err.
type fakeNetworks struct {
	mu  sync.Mutex
	pn  *PodNetwork
	err error
}

func (f *fakeNetworks) WaitPodNetwork(_ context.Context, namespace, name, uid string) (*PodNetwork, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return nil, f.err
	}
	if namespace != "default" || name != "web-0" || uid != "uid-1" {
		return nil, fmt.Errorf("unexpected pod %s/%s uid %s: %w", namespace, name, uid, ErrPodNotFound)
	}
	pn := *f.pn
	return &pn, nil
}

// rig is one node (a throwaway netns and an in-memory OVS database with br-int) with
// a pod sandbox (another netns) and a PodHandler plumbing into them.
type rig struct {
	nodeNS, podNS string
	db            *ovsDB
	attacher      *OVSAttacher
	networks      *fakeNetworks
	handler       *PodHandler
}

const testContainerID = "3f1c2b4a5d6e7f80112233445566778899aabbccddeeff00112233445566778a"

func newRig(t *testing.T) *rig {
	t.Helper()
	r := &rig{nodeNS: newNetNS(t), podNS: newNetNS(t), db: newOVSDB(t), networks: &fakeNetworks{pn: dualStack()}}
	r.db.fakeVswitchd(t)
	r.attacher = NewOVSAttacher(r.db.client, "")
	r.attacher.InstallTimeout = 5 * time.Second
	r.handler = NewPodHandler(r.networks, r.attacher)
	r.handler.HostNetNS = r.nodeNS
	r.handler.Log = testr.New(t) // errors the handler only logs (announcing) show up in the test output
	return r
}

func (r *rig) request(command string) *Request {
	return &Request{
		Command: command, ContainerID: testContainerID, Netns: r.podNS, IfName: "eth0",
		PodName: "web-0", PodNamespace: "default", PodUID: "uid-1",
		Config: []byte(`{"cniVersion":"1.0.0","name":"kovn","type":"kovn-cni","mtu":1450}`),
	}
}

// podView is what the pod's namespace holds, read from inside it.
type podView struct {
	link      netlink.Link
	addrs     []netlink.Addr
	routes    []netlink.Route
	txCsumOn  bool
	loopback  bool
	lookupErr error
}

func inspect(t *testing.T, nsPath, ifName string) podView {
	t.Helper()
	var v podView
	err := hostnet.WithNetNS(nsPath, func() error {
		v.link, v.lookupErr = netlink.LinkByName(ifName)
		if v.lookupErr != nil {
			return nil
		}
		var err error
		if v.addrs, err = netlink.AddrList(v.link, netlink.FAMILY_ALL); err != nil {
			return err
		}
		if v.routes, err = netlink.RouteList(v.link, netlink.FAMILY_ALL); err != nil {
			return err
		}
		if v.txCsumOn, err = hostnet.TxChecksum(ifName); err != nil {
			return err
		}
		lo, err := netlink.LinkByName("lo")
		v.loopback = err == nil && lo.Attrs().Flags&net.FlagUp != 0
		return nil
	})
	if err != nil {
		t.Fatalf("inspecting %s in %s: %v", ifName, nsPath, err)
	}
	return v
}

func TestPodHandlerAddCheckDel(t *testing.T) {
	r := newRig(t)
	r.db.fakeOVNController(t, func(id string) bool { return id == "web-0.default" })
	ctx := context.Background()
	hostIf := HostIfName(testContainerID)

	result, err := r.handler.Add(ctx, r.request(CmdAdd))
	if err != nil {
		t.Fatalf("ADD: %v", err)
	}
	checkResult(t, result, r.podNS, hostIf)
	checkPodSide(t, r.podNS)
	checkNodeSide(t, r.nodeNS, hostIf)
	checkAttached(t, r.db, hostIf, map[string]string{
		ExtIDIfaceID: "web-0.default", ExtIDOVNInstalled: "true", ExtIDPodNamespace: "default",
		ExtIDPodName: "web-0", ExtIDPodUID: "uid-1", ExtIDContainerID: testContainerID, ExtIDAttachedMAC: "0a:58:0a:10:00:05",
	})
	if v := inspect(t, "/proc/self/ns/net", hostIf); v.lookupErr == nil {
		t.Fatalf("%s appeared in the test's own namespace: plumbing escaped the node netns", hostIf)
	}

	if err := r.handler.Check(ctx, r.request(CmdCheck)); err != nil {
		t.Errorf("CHECK after ADD: %v", err)
	}
	checkPrevResultCheck(t, r)

	// The runtime's first DEL has the netns, the later ones do not; all succeed.
	del := r.request(CmdDel)
	for i, netnsPath := range []string{r.podNS, r.podNS, ""} {
		del.Netns = netnsPath
		if err := r.handler.Del(ctx, del); err != nil {
			t.Fatalf("DEL #%d (netns %q): %v", i+1, netnsPath, err)
		}
	}
	if v := inspect(t, r.nodeNS, hostIf); v.lookupErr == nil {
		t.Errorf("node-side veth %s survived DEL", hostIf)
	}
	if v := inspect(t, r.podNS, "eth0"); v.lookupErr == nil {
		t.Error("pod's eth0 survived DEL")
	}
	if n := len(r.db.ports(t)) + len(r.db.ifaces(t)); n != 0 {
		t.Errorf("%d OVS rows survived DEL", n)
	}
	if err := r.handler.Check(ctx, r.request(CmdCheck)); err == nil {
		t.Error("CHECK after DEL succeeded")
	}
}

func checkResult(t *testing.T, res *current.Result, podNS, hostIf string) {
	t.Helper()
	if res.CNIVersion != ResultVersion || len(res.Interfaces) != 2 {
		t.Fatalf("result %+v: want version %s and 2 interfaces", res, ResultVersion)
	}
	host, pod := res.Interfaces[0], res.Interfaces[1]
	if host.Name != hostIf || host.Sandbox != "" || host.Mac == "" {
		t.Errorf("host interface in result = %+v", host)
	}
	if pod.Name != "eth0" || pod.Sandbox != podNS || pod.Mac != "0a:58:0a:10:00:05" {
		t.Errorf("pod interface in result = %+v", pod)
	}
	var ips, gws []string
	for _, ip := range res.IPs {
		if ip.Interface == nil || *ip.Interface != 1 {
			t.Errorf("IP %s not tied to interface 1", ip.Address.String())
		}
		ips, gws = append(ips, ip.Address.String()), append(gws, ip.Gateway.String())
	}
	if !slices.Equal(ips, []string{"10.16.0.5/16", "fd00:10:16::5/64"}) || !slices.Equal(gws, []string{"10.16.0.1", "fd00:10:16::1"}) {
		t.Errorf("result IPs %v with gateways %v", ips, gws)
	}
	var routes []string
	for _, rt := range res.Routes {
		routes = append(routes, rt.Dst.String()+" via "+rt.GW.String())
	}
	if !slices.Equal(routes, []string{"0.0.0.0/0 via 10.16.0.1", "::/0 via fd00:10:16::1"}) {
		t.Errorf("result routes = %v", routes)
	}
	// The runtime may ask for an older version: the result must convert.
	if _, err := res.GetAsVersion("0.4.0"); err != nil {
		t.Errorf("result does not convert to 0.4.0: %v", err)
	}
}

func checkPodSide(t *testing.T, podNS string) {
	t.Helper()
	v := inspect(t, podNS, "eth0")
	if v.lookupErr != nil {
		t.Fatalf("eth0 missing in the pod: %v", v.lookupErr)
	}
	a := v.link.Attrs()
	if v.link.Type() != "veth" || a.HardwareAddr.String() != "0a:58:0a:10:00:05" || a.MTU != 1450 || a.Flags&net.FlagUp == 0 {
		t.Errorf("pod eth0: type %s MAC %s MTU %d flags %s; want veth 0a:58:0a:10:00:05 1450 up", v.link.Type(), a.HardwareAddr, a.MTU, a.Flags)
	}
	if v.txCsumOn {
		t.Error("TX checksum offload is still on for the pod's eth0")
	}
	if !v.loopback {
		t.Error("lo is down in the pod")
	}
	for _, want := range []string{"10.16.0.5/16", "fd00:10:16::5/64"} {
		found := slices.ContainsFunc(v.addrs, func(a netlink.Addr) bool {
			return a.IPNet.String() == want && a.Flags&unix.IFA_F_TENTATIVE == 0
		})
		if !found {
			t.Errorf("pod eth0 lacks usable (non-tentative) address %s; has %v", want, v.addrs)
		}
	}
	for _, want := range []Route{
		{Dst: netip.MustParsePrefix("0.0.0.0/0"), Gateway: netip.MustParseAddr("10.16.0.1")},
		{Dst: netip.MustParsePrefix("::/0"), Gateway: netip.MustParseAddr("fd00:10:16::1")},
	} {
		if !hasRoute(v.routes, want) {
			t.Errorf("pod lacks default route %s via %s; has %v", want.Dst, want.Gateway, v.routes)
		}
	}
}

func checkNodeSide(t *testing.T, nodeNS, hostIf string) {
	t.Helper()
	v := inspect(t, nodeNS, hostIf)
	if v.lookupErr != nil {
		t.Fatalf("node-side veth %s missing: %v", hostIf, v.lookupErr)
	}
	if a := v.link.Attrs(); v.link.Type() != "veth" || a.MTU != 1450 || a.Flags&net.FlagUp == 0 {
		t.Errorf("node-side %s: type %s MTU %d flags %s", hostIf, v.link.Type(), a.MTU, a.Flags)
	}
	if v.txCsumOn {
		t.Errorf("TX checksum offload is still on for %s", hostIf)
	}
}

// checkPrevResultCheck runs CHECK with the runtime's cached result, current and stale.
func checkPrevResultCheck(t *testing.T, r *rig) {
	t.Helper()
	for _, tc := range []struct {
		ip string
		ok bool
	}{{"10.16.0.5/16", true}, {"10.16.0.9/16", false}} {
		req := r.request(CmdCheck)
		req.Config = []byte(`{"cniVersion":"1.0.0","name":"kovn","type":"kovn-cni","mtu":1450,` +
			`"prevResult":{"cniVersion":"1.0.0","interfaces":[{"name":"eth0","sandbox":"x"}],` +
			`"ips":[{"interface":0,"address":"` + tc.ip + `"}]}}`)
		err := r.handler.Check(context.Background(), req)
		if (err == nil) != tc.ok {
			t.Errorf("CHECK with prevResult %s: %v, want ok=%t", tc.ip, err, tc.ok)
		}
	}
}

func TestPodHandlerRollback(t *testing.T) {
	r := newRig(t)
	r.attacher.InstallTimeout = 300 * time.Millisecond // and no ovn-controller at all
	hostIf := HostIfName(testContainerID)
	// Everything the pod sends arrives on the node-side veth: watch all of the node's links.
	var capFD int
	if err := hostnet.WithNetNS(r.nodeNS, func() (err error) { capFD, err = netnstest.Capture(0); return err }); err != nil {
		t.Fatal(err)
	}
	defer unix.Close(capFD)
	podV4, podV6, podMAC := r.networks.pn.IPs[0].Addr(), r.networks.pn.IPs[1].Addr(), r.networks.pn.MAC
	_, err := r.handler.Add(context.Background(), r.request(CmdAdd))
	if !errors.Is(err, ErrTryAgain) || AsCNIError(err).Code != types.ErrTryAgainLater || !strings.Contains(err.Error(), "ovn-installed") {
		t.Fatalf("ADD without ovn-controller = %v, want a try-again error about ovn-installed", err)
	}
	// A port OVN never installed is not announced: OVN would have dropped it anyway.
	if arps, nas := netnstest.CollectAnnouncements(t, capFD, podV4, podV6, podMAC, 100*time.Millisecond, 1); len(arps)+len(nas) != 0 {
		t.Errorf("a failed ADD announced the pod's addresses (%d ARPs, %d NAs)", len(arps), len(nas))
	}
	if v := inspect(t, r.nodeNS, hostIf); v.lookupErr == nil {
		t.Errorf("veth %s left behind by a failed ADD", hostIf)
	}
	if v := inspect(t, r.podNS, "eth0"); v.lookupErr == nil {
		t.Error("pod eth0 left behind by a failed ADD")
	}
	if n := len(r.db.ports(t)) + len(r.db.ifaces(t)); n != 0 {
		t.Errorf("%d OVS rows left behind by a failed ADD", n)
	}

	// The runtime retries once OVN is there: the same container plumbs fine, twice.
	r.db.fakeOVNController(t, func(string) bool { return true })
	r.attacher.InstallTimeout = 5 * time.Second
	for i := range 2 {
		if _, err := r.handler.Add(context.Background(), r.request(CmdAdd)); err != nil {
			t.Fatalf("ADD #%d after the failed one: %v", i+1, err)
		}
		// Once installed, the pod's addresses are announced; the first round before ADD returns.
		arps, nas := netnstest.CollectAnnouncements(t, capFD, podV4, podV6, podMAC, 100*time.Millisecond, 1)
		if len(arps) == 0 || len(nas) == 0 {
			t.Errorf("ADD #%d: %d gratuitous ARPs and %d NAs for the pod, want both", i+1, len(arps), len(nas))
		}
	}
	checkPodSide(t, r.podNS)
	checkAttached(t, r.db, hostIf, map[string]string{ExtIDIfaceID: "web-0.default", ExtIDOVNInstalled: "true"})
}

func TestPodHandlerAddErrors(t *testing.T) {
	r := newRig(t)
	r.db.fakeOVNController(t, func(string) bool { return true })
	ctx := context.Background()

	r.networks.err = fmt.Errorf("pod default/web-0: %w", ErrPodNotFound)
	if _, err := r.handler.Add(ctx, r.request(CmdAdd)); AsCNIError(err).Code != types.ErrUnknownContainer {
		t.Errorf("ADD of a deleted pod = %v, want code %d", err, types.ErrUnknownContainer)
	}
	r.networks.err = nil

	for _, tc := range []struct{ desc, netns, msg string }{
		{"missing netns", "/proc/self/fd/999999", "opening pod network namespace"},
		{"the node's own netns", r.nodeNS, "node's own network namespace"},
	} {
		req := r.request(CmdAdd)
		req.Netns = tc.netns
		_, err := r.handler.Add(ctx, req)
		if !errors.Is(err, ErrInvalidNetNS) || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("%s: ADD = %v, want ErrInvalidNetNS with %q", tc.desc, err, tc.msg)
		}
	}

	// Something else already holds eth0 in the pod: a clear error, nothing left behind.
	if err := hostnet.WithNetNS(r.podNS, func() error {
		la := netlink.NewLinkAttrs()
		la.Name = "eth0"
		return netlink.LinkAdd(&netlink.Veth{LinkAttrs: la, PeerName: "other", PeerTxQLen: -1})
	}); err != nil {
		t.Fatal(err)
	}
	_, err := r.handler.Add(ctx, r.request(CmdAdd))
	if err == nil || !strings.Contains(err.Error(), "eth0 already exists in the pod") {
		t.Errorf("ADD with eth0 taken = %v", err)
	}
	if v := inspect(t, r.nodeNS, HostIfName(testContainerID)); v.lookupErr == nil {
		t.Error("veth left behind after eth0 was found taken")
	}
	if n := len(r.db.ports(t)); n != 0 {
		t.Errorf("%d OVS ports left behind after eth0 was found taken", n)
	}
}

func TestPodHandlerEnablesIPv6(t *testing.T) {
	r := newRig(t)
	r.db.fakeOVNController(t, func(string) bool { return true })
	// Some runtimes create sandboxes with IPv6 disabled; new links inherit "default".
	err := hostnet.WithNetNS(r.podNS, func() error {
		entries, err := os.ReadDir("/proc/sys/net/ipv6/conf")
		if err != nil {
			return err
		}
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		if !slices.Equal(names, []string{"all", "default", "lo"}) {
			// Not the fresh pod namespace: never write sysctls elsewhere.
			return fmt.Errorf("/proc/sys/net/ipv6/conf shows %v, not the pod's namespace", names)
		}
		return os.WriteFile("/proc/sys/net/ipv6/conf/default/disable_ipv6", []byte("1"), 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.handler.Add(context.Background(), r.request(CmdAdd)); err != nil {
		t.Fatalf("ADD into a sandbox with IPv6 disabled: %v", err)
	}
	checkPodSide(t, r.podNS)
}

// TestPodHandlerIPv6Only: a pod of an IPv6-only subnet gets its address usable at once (not
// tentative), exactly one default route (::/0 via the IPv6 gateway, none for IPv4), and CHECK
// accepts what ADD made.
func TestPodHandlerIPv6Only(t *testing.T) {
	r := newRig(t)
	r.db.fakeOVNController(t, func(string) bool { return true })
	r.networks.pn.IPs = []netip.Prefix{netip.MustParsePrefix("fd00:10:16::5/64")}
	r.networks.pn.Gateways = []netip.Addr{netip.MustParseAddr("fd00:10:16::1")}
	res, err := r.handler.Add(context.Background(), r.request(CmdAdd))
	if err != nil {
		t.Fatalf("ADD: %v", err)
	}
	if len(res.IPs) != 1 || res.IPs[0].Address.String() != "fd00:10:16::5/64" || len(res.Routes) != 1 || res.Routes[0].Dst.String() != "::/0" {
		t.Errorf("result IPs %v routes %v, want fd00:10:16::5/64 and ::/0 only", res.IPs, res.Routes)
	}
	v := inspect(t, r.podNS, "eth0")
	if v.lookupErr != nil {
		t.Fatalf("eth0 missing in the pod: %v", v.lookupErr)
	}
	if !slices.ContainsFunc(v.addrs, func(a netlink.Addr) bool {
		return a.IPNet.String() == "fd00:10:16::5/64" && a.Flags&unix.IFA_F_TENTATIVE == 0
	}) {
		t.Errorf("pod eth0 lacks usable (non-tentative) fd00:10:16::5/64; has %v", v.addrs)
	}
	if !hasRoute(v.routes, Route{Dst: netip.MustParsePrefix("::/0"), Gateway: netip.MustParseAddr("fd00:10:16::1")}) {
		t.Errorf("pod lacks ::/0 via fd00:10:16::1; has %v", v.routes)
	}
	if slices.ContainsFunc(v.routes, func(rt netlink.Route) bool { return rt.Family == netlink.FAMILY_V4 }) {
		t.Errorf("IPv6-only pod has IPv4 routes: %v", v.routes)
	}
	if err := r.handler.Check(context.Background(), r.request(CmdCheck)); err != nil {
		t.Errorf("CHECK after ADD: %v", err)
	}
}
