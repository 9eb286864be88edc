package probe

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// echo answers name; a counter lets a test see how many requests it got.
func echo(t *testing.T, name string, hits *atomic.Int32) string {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		hits.Add(1)
		fmt.Fprintln(w, name)
	}))
	t.Cleanup(srv.Close)
	return srv.URL + "/"
}

func TestCheck(t *testing.T) {
	defer func(g time.Duration) { retryGap = g }(retryGap)
	retryGap = 50 * time.Millisecond
	var hits atomic.Int32
	c1 := echo(t, "c1/server-n1", &hits)
	wrong := echo(t, "c9/other", &hits)
	// Alternates between a c1 and a c2 backend, as a ClusterSetIP's load balancer would.
	var n atomic.Int32
	both := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintln(w, []string{"c1/server-n1", "c2/server-m1"}[n.Add(1)%2])
	}))
	defer both.Close()
	// Drops the first 7 requests, then answers as c1 every other request and drops the rest: a
	// ClusterSetIP whose c2 backends are blocked, drawn first 7 times.
	var m atomic.Int32
	halfBlocked := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if n := m.Add(1); n <= 7 || n%2 == 0 {
			conn, _, _ := w.(http.Hijacker).Hijack()
			conn.Close()
			return
		}
		fmt.Fprintln(w, "c1/server-n1")
	}))
	defer halfBlocked.Close()
	closed := httptest.NewServer(http.NotFoundHandler())
	closed.Close()
	// Drops its first 2 requests: a path still being programmed.
	var late atomic.Int32
	lateServer := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if late.Add(1) <= 2 {
			conn, _, _ := w.(http.Hijacker).Hijack()
			conn.Close()
			return
		}
		fmt.Fprintln(w, "c1/server-n1")
	}))
	defer lateServer.Close()
	for _, tc := range []struct {
		name string
		t    Target
		ok   bool
		says string
	}{
		{"answers", Target{URL: c1, Expect: []string{"c1/server-n1"}}, true, "answered by c1/server-n1"},
		{"wrong server", Target{URL: wrong, Expect: []string{"c1/server-n1"}}, false, "answered by c9/other, which is not one of"},
		{"nothing listens", Target{URL: closed.URL + "/", Expect: []string{"c1/server-n1"}}, false,
			"5 requests over 200ms failed (5 connecting to " + strings.TrimPrefix(closed.URL, "http://") + ")"},
		{"a name that does not resolve", Target{URL: "http://kovn-probe-test.invalid/", Expect: []string{"c1/server-n1"}}, false,
			"failed (5 in the DNS lookup)"},
		{"answers on the third request", Target{URL: lateServer.URL + "/", Expect: []string{"c1/server-n1"}}, true, "after 2 failed requests (2 awaiting the answer of"},
		{"each cluster answers", Target{URL: both.URL + "/", Expect: []string{"c1/server-n1", "c2/server-m1"}, EachCluster: []string{"c1", "c2"}},
			true, "answered by c1/server-n1,c2/server-m1"},
		{"one cluster never answers", Target{URL: c1, Expect: []string{"c1/server-n1", "c2/server-m1"}, EachCluster: []string{"c1", "c2"}},
			false, "32 requests: answered by c1/server-n1; never by a backend in c2"},
		{"one cluster's backends blocked", Target{URL: halfBlocked.URL + "/", Expect: []string{"c1/server-n1", "c2/server-m1"}, EachCluster: []string{"c1", "c2"}},
			false, "9 requests (8 failed: 8 awaiting the answer of " + strings.TrimPrefix(halfBlocked.URL, "http://") + "; the last: "},
	} {
		var out bytes.Buffer
		if err := CheckAll(context.Background(), &out, "c1/client-n1", []Target{tc.t}); err != nil {
			t.Fatal(err)
		}
		var r Result
		if err := json.Unmarshal(out.Bytes(), &r); err != nil {
			t.Fatalf("%s: %v: %s", tc.name, err, out.String())
		}
		if r.OK != tc.ok || !strings.Contains(r.Detail, tc.says) || r.From != "c1/client-n1" {
			t.Errorf("%s: %+v, want ok=%t saying %q", tc.name, r, tc.ok, tc.says)
		}
	}
}

// TestCheckAllAtOnce: a client's checks run together. The server answers only once all three
// checks' first requests are waiting (a barrier): one after another, the first request would
// time out alone and every check would fail or answer late.
func TestCheckAllAtOnce(t *testing.T) {
	const n = 3
	all := make(chan struct{})
	var count atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if count.Add(1) == n {
			close(all)
		}
		select {
		case <-all:
			fmt.Fprintln(w, "c1/server-n1")
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	var targets []Target
	for i := range n {
		targets = append(targets, Target{Check: fmt.Sprint("check ", i), URL: srv.URL + "/", Expect: []string{"c1/server-n1"}})
	}
	var out bytes.Buffer
	if err := CheckAll(context.Background(), &out, "c1/client-n1", targets); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != n {
		t.Fatalf("%d results, want %d:\n%s", len(lines), n, out.String())
	}
	for _, l := range lines {
		var r Result
		if err := json.Unmarshal([]byte(l), &r); err != nil || !r.OK || strings.Contains(r.Detail, "failed") {
			t.Errorf("result %s (%v): want answered at the first request", l, err)
		}
	}
}
