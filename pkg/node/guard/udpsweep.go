package guard

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/kovn/kovn/pkg/ovn"
)

// VswitchdSocket locates ovs-vswitchd's control socket.
type VswitchdSocket struct {
	Ctl    string // the socket; empty: ovs-vswitchd.<pid>.ctl in RunDir
	RunDir string // OVS's run directory (its pidfile's), when Ctl is empty
}

// Path is the socket's path, read from the pidfile when Ctl is not set.
func (s VswitchdSocket) Path() (string, error) {
	if s.Ctl != "" {
		return s.Ctl, nil
	}
	b, err := os.ReadFile(filepath.Join(s.RunDir, "ovs-vswitchd.pid"))
	if err != nil {
		return "", fmt.Errorf("ovs-vswitchd's control socket: %w", err)
	}
	return filepath.Join(s.RunDir, "ovs-vswitchd."+strings.TrimSpace(string(b))+".ctl"), nil
}

// StaleUDPSweeper flushes UDP conntrack entries that still send a Service's traffic to a
// backend the Service no longer has, on a userspace datapath.
//
// OVN flushes a removed backend's entries itself (the load balancers' ct_flush), but in the
// same step as it changes the flows, and the datapath revalidates its cached flows a little
// later: a datagram arriving in between is load-balanced by the old flows and commits a new
// entry to the deleted backend. A UDP flow that keeps sending keeps that entry alive for good
// and never reaches the remaining backends (measured in the lab: a DNS-like client pinned to
// a deleted pod for the rest of the test). kube-proxy clears the same state when a UDP
// endpoint goes. The sweeper runs when a UDP backend set changed (and at start) and then every
// second for 5 s, well past the revalidation, and deletes
// exactly the entries whose original destination is a UDP ClusterIP and port and whose reply
// comes from an address and port that is none of its current endpoints.
type StaleUDPSweeper struct {
	client.Client
	Socket VswitchdSocket

	mu    sync.Mutex
	last  string    // the UDP backend sets as last seen
	until time.Time // sweep again every second until then
}

// sweepFor is how long after a UDP backend set changed the sweeper keeps looking.
const sweepFor = 5 * time.Second

// Reconcile sweeps once and says when to sweep again.
func (s *StaleUDPSweeper) Reconcile(ctx context.Context, _ reconcile.Request) (reconcile.Result, error) {
	live, err := s.udpBackends(ctx)
	if err != nil {
		return reconcile.Result{}, err
	}
	now := time.Now()
	s.mu.Lock()
	if fp := fingerprint(live); fp != s.last {
		s.last, s.until = fp, now.Add(sweepFor)
	}
	again := now.Before(s.until)
	s.mu.Unlock()
	// Stale entries only come from a backend set that changed: other events (a Service's
	// labels, a TCP endpoint) cost no conntrack dump.
	if again && len(live) > 0 {
		n, err := s.sweep(ctx, live)
		if err != nil {
			return reconcile.Result{}, err
		}
		if n > 0 {
			log.FromContext(ctx).Info("flushed UDP conntrack entries pinned to a backend their Service no longer has", "entries", n)
		}
	}
	if again {
		return reconcile.Result{RequeueAfter: time.Second}, nil
	}
	return reconcile.Result{}, nil
}

// sweep flushes the stale entries and returns how many.
func (s *StaleUDPSweeper) sweep(ctx context.Context, live map[netip.AddrPort][]netip.AddrPort) (int, error) {
	sock, err := s.Socket.Path()
	if err != nil {
		return 0, err
	}
	dump, err := ovn.Unixctl(ctx, sock, "dpctl/dump-conntrack")
	if err != nil {
		return 0, err
	}
	stale := StaleUDPEntries(ParseConntrack(dump), live)
	for _, e := range stale {
		if _, err := ovn.Unixctl(ctx, sock, "dpctl/flush-conntrack", "zone="+strconv.Itoa(int(e.Zone)), e.origTuple()); err != nil {
			return 0, err
		}
	}
	return len(stale), nil
}

// udpBackends maps each UDP ClusterIP and port to the addresses and ports of its Service's
// endpoints (every endpoint of its EndpointSlices, ready or not: the sweeper only removes
// what no endpoint of the Service has any more).
func (s *StaleUDPSweeper) udpBackends(ctx context.Context) (map[netip.AddrPort][]netip.AddrPort, error) {
	var svcs corev1.ServiceList
	if err := s.List(ctx, &svcs); err != nil {
		return nil, err
	}
	out := map[netip.AddrPort][]netip.AddrPort{}
	for i := range svcs.Items {
		svc := &svcs.Items[i]
		if !slices.ContainsFunc(svc.Spec.Ports, func(p corev1.ServicePort) bool { return p.Protocol == corev1.ProtocolUDP }) {
			continue
		}
		var eps discoveryv1.EndpointSliceList
		if err := s.List(ctx, &eps, client.InNamespace(svc.Namespace), client.MatchingLabels{discoveryv1.LabelServiceName: svc.Name}); err != nil {
			return nil, err
		}
		maps := UDPBackends(svc, eps.Items)
		for k, v := range maps {
			out[k] = v
		}
	}
	return out, nil
}

// UDPBackends maps each of svc's UDP ClusterIPs and ports to its endpoints' addresses and
// target ports (the port of the same name in the slices).
func UDPBackends(svc *corev1.Service, slices []discoveryv1.EndpointSlice) map[netip.AddrPort][]netip.AddrPort {
	out := map[netip.AddrPort][]netip.AddrPort{}
	for _, p := range svc.Spec.Ports {
		if p.Protocol != corev1.ProtocolUDP {
			continue
		}
		var backends []netip.AddrPort
		for _, sl := range slices {
			for _, sp := range sl.Ports {
				if sp.Port == nil || ptr.Deref(sp.Name, "") != p.Name || ptr.Deref(sp.Protocol, corev1.ProtocolTCP) != corev1.ProtocolUDP {
					continue
				}
				for _, ep := range sl.Endpoints {
					for _, a := range ep.Addresses {
						if ip, err := netip.ParseAddr(a); err == nil {
							backends = append(backends, netip.AddrPortFrom(ip, uint16(*sp.Port)))
						}
					}
				}
			}
		}
		for _, c := range svc.Spec.ClusterIPs {
			if ip, err := netip.ParseAddr(c); err == nil {
				out[netip.AddrPortFrom(ip, uint16(p.Port))] = backends
			}
		}
	}
	return out
}

func fingerprint(live map[netip.AddrPort][]netip.AddrPort) string {
	var lines []string
	for vip, bes := range live {
		b := make([]string, len(bes))
		for i, be := range bes {
			b[i] = be.String()
		}
		slices.Sort(b)
		lines = append(lines, vip.String()+"="+strings.Join(b, ","))
	}
	slices.Sort(lines)
	return strings.Join(lines, ";")
}

// ConntrackEntry is one UDP entry of dpctl/dump-conntrack.
type ConntrackEntry struct {
	OrigSrc, OrigDst   netip.AddrPort
	ReplySrc, ReplyDst netip.AddrPort
	Zone               uint16
}

// origTuple is the entry's original tuple as dpctl/flush-conntrack takes it (the userspace
// conntrack finds an entry by its original, pre-NAT tuple).
func (e ConntrackEntry) origTuple() string {
	src, dst := "ct_nw_src", "ct_nw_dst"
	if e.OrigSrc.Addr().Is6() {
		src, dst = "ct_ipv6_src", "ct_ipv6_dst"
	}
	return fmt.Sprintf("%s=%s,%s=%s,ct_nw_proto=17,ct_tp_src=%d,ct_tp_dst=%d",
		src, e.OrigSrc.Addr(), dst, e.OrigDst.Addr(), e.OrigSrc.Port(), e.OrigDst.Port())
}

var udpEntry = regexp.MustCompile(`^udp,orig=\(src=([^,]+),dst=([^,]+),sport=(\d+),dport=(\d+)\),reply=\(src=([^,]+),dst=([^,]+),sport=(\d+),dport=(\d+)\)(?:.*?,zone=(\d+))?`)

// ParseConntrack reads the UDP entries of a dpctl/dump-conntrack listing; other lines are
// skipped.
func ParseConntrack(dump string) []ConntrackEntry {
	var out []ConntrackEntry
	for _, l := range strings.Split(dump, "\n") {
		m := udpEntry.FindStringSubmatch(strings.TrimSpace(l))
		if m == nil {
			continue
		}
		ap := func(ip, port string) (netip.AddrPort, bool) {
			a, err := netip.ParseAddr(ip)
			p, perr := strconv.ParseUint(port, 10, 16)
			return netip.AddrPortFrom(a, uint16(p)), err == nil && perr == nil
		}
		osrc, ok1 := ap(m[1], m[3])
		odst, ok2 := ap(m[2], m[4])
		rsrc, ok3 := ap(m[5], m[7])
		rdst, ok4 := ap(m[6], m[8])
		if !ok1 || !ok2 || !ok3 || !ok4 {
			continue
		}
		e := ConntrackEntry{OrigSrc: osrc, OrigDst: odst, ReplySrc: rsrc, ReplyDst: rdst}
		if m[9] != "" {
			z, _ := strconv.ParseUint(m[9], 10, 16)
			e.Zone = uint16(z)
		}
		out = append(out, e)
	}
	return out
}

// StaleUDPEntries are the entries load-balanced (DNATed) from a UDP ClusterIP and port in
// live to an address and port that is not one of its backends there. Entries of other
// destinations, and entries that were not translated (the reply comes from the ClusterIP
// itself), are left alone.
func StaleUDPEntries(entries []ConntrackEntry, live map[netip.AddrPort][]netip.AddrPort) []ConntrackEntry {
	var out []ConntrackEntry
	for _, e := range entries {
		backends, ok := live[e.OrigDst]
		if !ok || e.ReplySrc == e.OrigDst || slices.Contains(backends, e.ReplySrc) {
			continue
		}
		out = append(out, e)
	}
	return out
}

// SetupWithManager: every Service or EndpointSlice event enqueues the one key.
func (s *StaleUDPSweeper) SetupWithManager(mgr ctrl.Manager) error {
	one := handler.EnqueueRequestsFromMapFunc(func(context.Context, client.Object) []reconcile.Request {
		return []reconcile.Request{{NamespacedName: types.NamespacedName{Name: "udp-conntrack"}}}
	})
	return ctrl.NewControllerManagedBy(mgr).Named("udp-conntrack").
		Watches(&corev1.Service{}, one).Watches(&discoveryv1.EndpointSlice{}, one).Complete(s)
}
