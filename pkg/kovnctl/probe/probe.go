// Package probe is what the connectivity test's pods run (cmd/kovn-probe): an echo server
// answering with its pod's name, and a checker that probes the targets kubectl-kovn planned
// and prints one JSON result per line for it to read from the pod's log. Standard library
// only, so the probe image stays small.
package probe

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	neturl "net/url"
	"slices"
	"strings"
	"sync"
	"time"
)

// Port is the echo servers' port.
const Port = 8080

// Target is one path a client pod checks.
type Target struct {
	Check string `json:"check"` // e.g. "pod-to-pod (other node)", "pod-to-Service", "DNS"
	To    string `json:"to"`    // what it reaches, for people
	URL   string `json:"url"`
	// Expect: the server pods ("cluster/pod") that may answer. With EachCluster, a server of
	// each of those clusters must answer at least once (a ClusterSetIP's backends), else any one.
	Expect      []string `json:"expect"`
	EachCluster []string `json:"eachCluster,omitempty"`
}

// Result is a Target's outcome from one client.
type Result struct {
	Target
	From   string `json:"from"`
	OK     bool   `json:"ok"`
	Detail string `json:"detail"`
}

// Serve answers every request with "name" until ctx ends.
func Serve(ctx context.Context, addr, name string) error {
	srv := &http.Server{Addr: addr, ReadHeaderTimeout: 5 * time.Second,
		Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, name) })}
	go func() { <-ctx.Done(); _ = srv.Close() }()
	if err := srv.ListenAndServe(); err != http.ErrServerClosed {
		return err
	}
	return nil
}

// CheckAll probes every target from the pod named from, all at once, and writes one JSON
// Result per line as each finishes. At once: each check's time is bounded by its own retries
// (a blocked path costs anyOneTries x retryGap, a cluster that never answers a ClusterSetIP
// maxFailedUnanswered requests), and one after another a run with a few blocked paths took
// their sum (80 s for 14 checks); together it takes the longest. The checks still probe each
// path on its own: every request has its own connection.
func CheckAll(ctx context.Context, w io.Writer, from string, targets []Target) error {
	enc := json.NewEncoder(w)
	var mu sync.Mutex
	var firstErr error
	var wg sync.WaitGroup
	for _, t := range targets {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := check(ctx, t)
			r.From = from
			mu.Lock()
			defer mu.Unlock()
			if err := enc.Encode(r); err != nil && firstErr == nil {
				firstErr = err
			}
		}()
	}
	wg.Wait()
	return firstErr
}

// eachClusterTries bounds an each-cluster check. It stops at the first answer from the last
// cluster, so the bound only costs time when a cluster never answers; with two clusters'
// backends equally likely, 32 requests miss one by chance once in 2^32 (12 did once in CI).
// A check that has had an answer gives up after maxFailed unanswered requests (a cluster whose
// backends time out would otherwise cost 2 s a request); one that has had none goes on to
// maxFailedUnanswered, so a blocked cluster's backends drawn first (1 in 64 for 6 draws of two
// clusters) do not hide which cluster answers.
const (
	eachClusterTries    = 32
	maxFailed           = 6
	maxFailedUnanswered = 18
	anyOneTries         = 5
)

// retryGap is the least time between the starts of two requests after a failed one: a refused
// connection fails at once, and a path whose flows a node is still installing (a pod that just
// started, a node busy recomputing) would otherwise fail all its tries within milliseconds.
// An any-one check so fails only when its path stays down for anyOneTries x retryGap (10 s);
// each-cluster checks keep their own bounds (maxFailed).
var retryGap = 2 * time.Second

// requestTimeout bounds a request's connection and answer; a name's lookup gets lookupTimeout
// more, as a resolver's first try does (resolv.conf's default timeout: 5 s), so one lost UDP
// query on a busy node is not a failed path.
const (
	requestTimeout = 2 * time.Second
	lookupTimeout  = 5 * time.Second
)

// check: up to anyOneTries requests for any-one targets, up to eachClusterTries for
// each-cluster ones, requestTimeout each (see maxFailed, retryGap).
func check(ctx context.Context, t Target) Result {
	client := &http.Client{Timeout: requestTimeout, Transport: &http.Transport{DisableKeepAlives: true,
		DialContext: (&net.Dialer{Timeout: requestTimeout}).DialContext}}
	tries := anyOneTries
	if len(t.EachCluster) > 0 {
		tries = eachClusterTries
	}
	seen, clusters := map[string]bool{}, map[string]bool{}
	var lastErr error
	var stages failures
	failed := 0
	start := time.Now()
	sent := 0
	for ; sent < tries && failed < maxFailedUnanswered && (failed < maxFailed || len(seen) == 0); sent++ {
		began := time.Now()
		name, stage, err := request(ctx, client, t.URL)
		if err != nil {
			lastErr, failed = err, failed+1
			stages.add(stage)
			if len(t.EachCluster) == 0 && sent+1 < tries {
				select {
				case <-ctx.Done():
				case <-time.After(time.Until(began.Add(retryGap))):
				}
			}
			continue
		}
		if !slices.Contains(t.Expect, name) {
			lastErr = fmt.Errorf("answered by %s, which is not one of %v", name, t.Expect)
			continue
		}
		seen[name] = true
		clusters[strings.SplitN(name, "/", 2)[0]] = true
		if len(t.EachCluster) == 0 || len(clusters) == len(t.EachCluster) {
			after := ""
			if failed > 0 {
				after = fmt.Sprintf(" after %d failed requests (%s; the last: %v)", failed, stages, lastErr)
			}
			return Result{Target: t, OK: true, Detail: fmt.Sprintf("answered by %s in %s%s", strings.Join(sortedKeys(seen), ","),
				time.Since(start).Round(time.Millisecond), after)}
		}
	}
	if len(t.EachCluster) > 0 && len(seen) > 0 {
		var missing []string
		for _, c := range t.EachCluster {
			if !clusters[c] {
				missing = append(missing, c)
			}
		}
		unanswered := ""
		if failed > 0 {
			unanswered = fmt.Sprintf(" (%d failed: %s; the last: %v)", failed, stages, lastErr)
		}
		return Result{Target: t, Detail: fmt.Sprintf("%d requests%s: answered by %s; never by a backend in %s", sent, unanswered,
			strings.Join(sortedKeys(seen), ","), strings.Join(missing, ","))}
	}
	return Result{Target: t, Detail: fmt.Sprintf("%d requests over %s failed (%s), the last: %v", sent, time.Since(start).Round(100*time.Millisecond), stages, lastErr)}
}

// request resolves a name in url itself and requests its first address, as a client taking
// getaddrinfo's first answer does. Go's dialer would race the other family after 300 ms (and
// then each next address): with a dual-stack ClusterSetIP a near backend would win whenever a
// far one is slow to connect, and a check of which clusters' backends answer would see only
// the near cluster on a busy machine. The lookup gets its own lookupTimeout.
func request(ctx context.Context, c *http.Client, rawURL string) (name, stage string, err error) {
	u, err := neturl.Parse(rawURL)
	if err != nil {
		return "", "", err
	}
	if host := u.Hostname(); net.ParseIP(host) == nil {
		lookupCtx, cancel := context.WithTimeout(ctx, lookupTimeout)
		defer cancel()
		ips, err := net.DefaultResolver.LookupIPAddr(lookupCtx, host)
		if err != nil {
			return "", "in the DNS lookup", err
		}
		port := u.Port()
		if port == "" {
			port = "80"
		}
		u.Host = net.JoinHostPort(ips[0].IP.String(), port) // a lookup without error has an address
	}
	return get(ctx, c, u.String())
}

// get requests url and returns the server's name, or the stage at which the request failed:
// a path that does not connect and a server that accepts but does not answer are different
// faults, and the address says which backend.
func get(ctx context.Context, c *http.Client, url string) (name, stage string, err error) {
	var at requestStage
	req, err := http.NewRequestWithContext(httptrace.WithClientTrace(ctx, at.trace()), http.MethodGet, url, nil)
	if err != nil {
		return "", "", err
	}
	resp, err := c.Do(req)
	if err != nil {
		return "", at.String(), err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 256))
	return strings.TrimSpace(string(b)), "reading the answer", err
}

// requestStage follows one request through its connection attempts and the wait for the
// answer (the transport calls the hooks from its own goroutines, hence the lock).
type requestStage struct {
	mu        sync.Mutex
	dialled   []string
	connected string
}

func (s *requestStage) set(f func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f()
}

func (s *requestStage) trace() *httptrace.ClientTrace {
	return &httptrace.ClientTrace{
		ConnectStart: func(_, addr string) { s.set(func() { s.dialled = append(s.dialled, addr) }) },
		GotConn: func(i httptrace.GotConnInfo) {
			s.set(func() { s.connected = i.Conn.RemoteAddr().String() })
		},
	}
}

func (s *requestStage) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.connected != "":
		return "awaiting the answer of " + s.connected
	case len(s.dialled) > 0:
		return "connecting to " + strings.Join(s.dialled, " and ")
	}
	return "before connecting"
}

// failures counts a check's failed requests by the stage they failed at, in order of first
// failure.
type failures struct {
	order []string
	n     map[string]int
}

func (f *failures) add(stage string) {
	if f.n == nil {
		f.n = map[string]int{}
	}
	if f.n[stage] == 0 {
		f.order = append(f.order, stage)
	}
	f.n[stage]++
}

func (f failures) String() string {
	parts := make([]string, 0, len(f.order))
	for _, s := range f.order {
		parts = append(parts, fmt.Sprintf("%d %s", f.n[s], s))
	}
	return strings.Join(parts, ", ")
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
