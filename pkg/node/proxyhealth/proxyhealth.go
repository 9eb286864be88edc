// Package proxyhealth is what kube-proxy answers over HTTP and kovn-daemon answers in its
// place: the proxy health port (10256: /healthz, /livez), which load balancers and operators
// probe to learn whether a node's Service programming is current, and each ETP=Local
// LoadBalancer Service's healthCheckNodePort, which tells an external load balancer whether
// this node has a ready endpoint of the Service. The bodies and status codes are kube-proxy's,
// so whatever probes kube-proxy today probes kovn the same way.
package proxyhealth

import (
	"encoding/json"
	"net/http"
	"sync"
	"time"
)

// DefaultTimeout is how long a Service change may wait to be programmed before the node reads
// unhealthy (kube-proxy's default: twice its 30 s sync period).
const DefaultTimeout = 60 * time.Second

// Tracker follows the node's Service programming: a change queued, then programmed. The node is
// healthy unless a change has waited longer than Timeout.
type Tracker struct {
	Timeout time.Duration
	now     func() time.Time

	mu      sync.Mutex
	updated time.Time // the last successful programming
	pending time.Time // the oldest change not programmed yet; zero when none
}

// NewTracker returns a Tracker that is healthy until a change waits longer than timeout.
func NewTracker(timeout time.Duration) *Tracker {
	return &Tracker{Timeout: timeout, now: time.Now}
}

// Queued records a change to program; the oldest one not programmed counts.
func (t *Tracker) Queued() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.pending.IsZero() {
		t.pending = t.now()
	}
}

// Programmed records that every change queued so far is in the node's rules.
func (t *Tracker) Programmed() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.updated, t.pending = t.now(), time.Time{}
}

// Healthy says whether no change has waited longer than Timeout, with the last programming.
func (t *Tracker) Healthy() (bool, time.Time, time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.now()
	return t.pending.IsZero() || now.Sub(t.pending) <= t.Timeout, t.updated, now
}

// proxyStatus is kube-proxy's /healthz body.
type proxyStatus struct {
	LastUpdated  string `json:"lastUpdated"`
	CurrentTime  string `json:"currentTime"`
	NodeEligible *bool  `json:"nodeEligible,omitempty"`
}

// Handler serves /healthz and /livez as kube-proxy does: 200 with the times while healthy, 503
// otherwise. /healthz also answers for the node's eligibility as a load balancer target
// (eligible returns false while the node is being deleted); /livez is the process's own health.
func (t *Tracker) Handler(eligible func() bool) http.Handler {
	mux := http.NewServeMux()
	serve := func(w http.ResponseWriter, withNode bool) {
		healthy, updated, now := t.Healthy()
		st := proxyStatus{LastUpdated: updated.UTC().Format(time.RFC3339Nano), CurrentTime: now.UTC().Format(time.RFC3339Nano)}
		if withNode {
			ok := eligible == nil || eligible()
			st.NodeEligible = &ok
			healthy = healthy && ok
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		if !healthy {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
		_ = json.NewEncoder(w).Encode(st)
	}
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { serve(w, true) })
	mux.HandleFunc("/livez", func(w http.ResponseWriter, _ *http.Request) { serve(w, false) })
	return mux
}

// ProxyMode is what kovn answers for kube-proxy's /proxyMode: the Services of the node are
// kovn's (OVN load balancers and kovn-daemon's node rules), no kube-proxy mode.
const ProxyMode = "kovn"

// StatusHandler serves kube-proxy's status port: /proxyMode, which operators and Kubernetes' e2e
// ("should check kube-proxy urls") read to learn which proxy serves the node.
func StatusHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/proxyMode", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		_, _ = w.Write([]byte(ProxyMode))
	})
	return mux
}
