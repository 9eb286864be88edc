// Package pinger is kovn-pinger: from a pod on every node it checks, every interval, the
// paths pods depend on (to every other node, to a pod on every other node, to the API
// server's ClusterIP, DNS names, configured external addresses and the pingers of the other
// clusters of the clusterset) and exports latency histograms and loss counters per source and
// target, so a lossy path shows in Prometheus and in kubectl kovn status.
package pinger

import (
	"context"
	"net"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
)

// +kubebuilder:rbac:groups="",resources=nodes,verbs=list;watch
// +kubebuilder:rbac:groups="",namespace=kube-system,resources=pods,verbs=list;watch
// +kubebuilder:rbac:groups=multicluster.x-k8s.io,namespace=kube-system,resources=serviceexports,verbs=create

// Kinds of targets.
const (
	KindNode      = "node"       // another node's InternalIP
	KindPod       = "pod"        // the pinger pod of another node
	KindService   = "service"    // the API server's ClusterIP (kubernetes.default), TCP
	KindDNS       = "dns"        // a name resolved through the pod's resolver
	KindExternal  = "external"   // a configured address outside the cluster
	KindRemotePod = "remote-pod" // a pinger pod of another cluster (clusterset DNS)
)

// Config says what one pinger checks.
type Config struct {
	Node     string        // the node this pinger runs on: the source of every path
	Interval time.Duration // between rounds
	Count    int           // probes per target and round
	Timeout  time.Duration // for each probe's answer
	// APIServer is kubernetes.default's ClusterIP:port (KUBERNETES_SERVICE_HOST/PORT).
	APIServer string
	DNSNames  []string
	External  []netip.Addr
	// ClusterSetName, when set, is the clusterset.local name of the pinger pods of every
	// cluster (their headless Service, exported): its addresses not of this cluster's pingers
	// are the remote pods.
	ClusterSetName string
}

// Target is one path a round checks.
type Target struct {
	Kind   string
	Name   string // node name, DNS name, address
	Family string // ipv4 | ipv6 | "" (DNS, a TCP address of either)
	Addr   netip.Addr
	Host   string // DNS name, or host:port for KindService
}

// Targets are the paths from node: every other node's InternalIPs, the pinger pod of every
// other node, the API server, the DNS names, the external addresses and the remote pods (the
// clusterset's pinger addresses that are none of this cluster's pingers).
func Targets(cfg Config, nodes []corev1.Node, pingers []corev1.Pod, clusterSet []netip.Addr) []Target {
	var out []Target
	for _, n := range nodes {
		if n.Name == cfg.Node {
			continue
		}
		for _, a := range n.Status.Addresses {
			if ip, err := netip.ParseAddr(a.Address); err == nil && a.Type == corev1.NodeInternalIP {
				out = append(out, Target{Kind: KindNode, Name: n.Name, Family: family(ip), Addr: ip})
			}
		}
	}
	local := map[netip.Addr]bool{}
	for _, p := range pingers {
		for _, a := range p.Status.PodIPs {
			ip, err := netip.ParseAddr(a.IP)
			if err != nil {
				continue
			}
			local[ip] = true
			if p.Spec.NodeName != cfg.Node && p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil {
				out = append(out, Target{Kind: KindPod, Name: p.Spec.NodeName, Family: family(ip), Addr: ip})
			}
		}
	}
	if cfg.APIServer != "" {
		out = append(out, Target{Kind: KindService, Name: "kubernetes.default", Host: cfg.APIServer})
	}
	for _, n := range cfg.DNSNames {
		out = append(out, Target{Kind: KindDNS, Name: n, Host: n})
	}
	for _, a := range cfg.External {
		out = append(out, Target{Kind: KindExternal, Name: a.String(), Family: family(a), Addr: a})
	}
	for _, a := range clusterSet {
		if !local[a] {
			out = append(out, Target{Kind: KindRemotePod, Name: a.String(), Family: family(a), Addr: a})
		}
	}
	slices.SortFunc(out, func(a, b Target) int {
		if c := strings.Compare(a.Kind+"/"+a.Name+"/"+a.Family, b.Kind+"/"+b.Name+"/"+b.Family); c != 0 {
			return c
		}
		return a.Addr.Compare(b.Addr)
	})
	return out
}

func family(a netip.Addr) string {
	if a.Unmap().Is4() {
		return "ipv4"
	}
	return "ipv6"
}

// Pinger runs rounds and records them.
type Pinger struct {
	Cfg Config
	// Nodes and Pingers read the cluster (informer caches): the nodes, and the pinger pods.
	Nodes    func() []corev1.Node
	Pingers  func() []corev1.Pod
	Resolver *net.Resolver
	Metrics  *Metrics

	v4, v6 *echoer
	seen   map[Target]bool // the last round's targets, whose series go when they do
	rounds atomic.Int64
}

// Rounds is how many rounds finished.
func (p *Pinger) Rounds() int64 { return p.rounds.Load() }

// Start runs a round every Interval until ctx ends (manager.Runnable-like).
func (p *Pinger) Start(ctx context.Context) error {
	var err error
	if p.v4, err = newEchoer(icmpV4); err != nil {
		return err
	}
	defer p.v4.close()
	if p.v6, err = newEchoer(icmpV6); err != nil {
		p.v6 = nil // a host without IPv6: IPv6 targets count as lost
	} else {
		defer p.v6.close()
	}
	if p.Resolver == nil {
		p.Resolver = net.DefaultResolver
	}
	for {
		p.Round(ctx)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(p.Cfg.Interval):
		}
	}
}

// Round checks every target once (Count probes each, all targets at once) and records it.
func (p *Pinger) Round(ctx context.Context) {
	var remote []netip.Addr
	if p.Cfg.ClusterSetName != "" {
		remote = p.lookup(ctx, p.Cfg.ClusterSetName)
	}
	targets := Targets(p.Cfg, p.Nodes(), p.Pingers(), remote)
	var wg sync.WaitGroup
	sem := make(chan struct{}, 32)
	for _, t := range targets {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			p.Metrics.record(p.Cfg.Node, t, p.probe(ctx, t))
		}()
	}
	wg.Wait()
	now := map[Target]bool{}
	for _, t := range targets {
		now[t] = true
	}
	for t := range p.seen {
		if !now[t] {
			p.Metrics.forget(p.Cfg.Node, t)
		}
	}
	p.seen = now
	p.Metrics.rounds.WithLabelValues(p.Cfg.Node).SetToCurrentTime()
	p.rounds.Add(1)
}

// probe sends Count probes 100 ms apart: each one's latency, or a negative duration when it
// was lost.
func (p *Pinger) probe(ctx context.Context, t Target) []time.Duration {
	out := make([]time.Duration, 0, p.Cfg.Count)
	for i := 0; i < p.Cfg.Count; i++ {
		if i > 0 {
			time.Sleep(100 * time.Millisecond)
		}
		d, ok := p.once(ctx, t)
		if !ok {
			d = -1
		}
		out = append(out, d)
	}
	return out
}

func (p *Pinger) once(ctx context.Context, t Target) (time.Duration, bool) {
	ctx, cancel := context.WithTimeout(ctx, p.Cfg.Timeout)
	defer cancel()
	start := time.Now()
	switch t.Kind {
	case KindService:
		c, err := (&net.Dialer{}).DialContext(ctx, "tcp", t.Host)
		if err != nil {
			return 0, false
		}
		c.Close()
		return time.Since(start), true
	case KindDNS:
		addrs, err := p.Resolver.LookupHost(ctx, t.Host)
		return time.Since(start), err == nil && len(addrs) > 0
	}
	e := p.v4
	if t.Family == "ipv6" {
		e = p.v6
	}
	if e == nil {
		return 0, false
	}
	return e.echo(ctx, t.Addr, p.Cfg.Timeout)
}

func (p *Pinger) lookup(ctx context.Context, name string) []netip.Addr {
	ctx, cancel := context.WithTimeout(ctx, p.Cfg.Timeout)
	defer cancel()
	addrs, err := p.Resolver.LookupNetIP(ctx, "ip", name)
	if err != nil {
		return nil
	}
	for i := range addrs {
		addrs[i] = addrs[i].Unmap()
	}
	return addrs
}

// Metrics are the pinger's series.
type Metrics struct {
	latency *prometheus.HistogramVec
	sent    *prometheus.CounterVec
	lost    *prometheus.CounterVec
	lossy   *prometheus.GaugeVec
	rounds  *prometheus.GaugeVec

	mu         sync.Mutex
	lostBefore map[string]bool // per path: whether the previous round lost a probe
}

// Labels of every path series.
var pathLabels = []string{"source", "kind", "target", "family"}

// NewMetrics registers the pinger's series with reg.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		lostBefore: map[string]bool{},
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "kovn_pinger_latency_seconds",
			Help:    "Round-trip time of the answered probes of a path (ICMP echo, TCP connect, DNS lookup)",
			Buckets: prometheus.ExponentialBuckets(0.0001, 2, 16)}, pathLabels),
		sent: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kovn_pinger_probes_total",
			Help: "Probes sent on a path"}, pathLabels),
		lost: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kovn_pinger_lost_total",
			Help: "Probes of a path that got no answer in time"}, pathLabels),
		lossy: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "kovn_pinger_path_lossy",
			Help: "1 when the last round lost every probe of the path, or it and the round before each lost one, else 0"}, pathLabels),
		rounds: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "kovn_pinger_last_round_timestamp_seconds",
			Help: "When the pinger last finished a round"}, []string{"source"}),
	}
	for _, c := range []prometheus.Collector{m.latency, m.sent, m.lost, m.lossy, m.rounds} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

func (m *Metrics) record(source string, t Target, results []time.Duration) {
	l := []string{source, t.Kind, t.Name, t.Family}
	lost := 0
	for _, d := range results {
		m.sent.WithLabelValues(l...).Inc()
		if d < 0 {
			lost++
			m.lost.WithLabelValues(l...).Inc()
			continue
		}
		m.latency.WithLabelValues(l...).Observe(d.Seconds())
	}
	m.lost.WithLabelValues(l...).Add(0) // the series exists from the first round
	// Lossy: every probe of the round lost, or a loss in two rounds in a row. The userspace
	// datapath may drop the first packet to a new tunnel peer, and one such drop is no lossy
	// path; a path that answers nothing is one at once.
	key := strings.Join(l, "|")
	m.mu.Lock()
	before := m.lostBefore[key]
	m.lostBefore[key] = lost > 0
	m.mu.Unlock()
	lossy := 0.0
	if (lost > 0 && before) || (lost == len(results) && len(results) > 1) {
		lossy = 1
	}
	m.lossy.WithLabelValues(l...).Set(lossy)
}

func (m *Metrics) forget(source string, t Target) {
	l := []string{source, t.Kind, t.Name, t.Family}
	m.latency.DeleteLabelValues(l...)
	m.sent.DeleteLabelValues(l...)
	m.lost.DeleteLabelValues(l...)
	m.lossy.DeleteLabelValues(l...)
	m.mu.Lock()
	delete(m.lostBefore, strings.Join(l, "|"))
	m.mu.Unlock()
}
