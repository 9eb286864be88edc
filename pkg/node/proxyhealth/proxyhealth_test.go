package proxyhealth

import (
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestTrackerHealthyUntilAChangeWaitsTooLong: healthy with nothing pending, while a change is
// younger than the timeout and after it is programmed; unhealthy once it waited longer.
func TestTrackerHealthyUntilAChangeWaitsTooLong(t *testing.T) {
	now := time.Unix(1000, 0)
	tr := NewTracker(60 * time.Second)
	tr.now = func() time.Time { return now }
	check := func(want bool, what string) {
		t.Helper()
		if ok, _, _ := tr.Healthy(); ok != want {
			t.Errorf("%s: healthy %t, want %t", what, ok, want)
		}
	}
	check(true, "nothing queued")
	tr.Queued()
	now = now.Add(30 * time.Second)
	tr.Queued() // a later change does not reset the oldest
	check(true, "a change 30 s old")
	now = now.Add(31 * time.Second)
	check(false, "a change 61 s old")
	tr.Programmed()
	check(true, "programmed")
	if _, updated, _ := tr.Healthy(); !updated.Equal(now) {
		t.Errorf("last update %v, want %v", updated, now)
	}
}

// TestHandlerAnswersAsKubeProxy: /healthz and /livez bodies and codes.
func TestHandlerAnswersAsKubeProxy(t *testing.T) {
	now := time.Unix(2000, 0)
	tr := NewTracker(time.Minute)
	tr.now = func() time.Time { return now }
	tr.Programmed()
	eligible := true
	h := tr.Handler(func() bool { return eligible })
	get := func(path string) (int, map[string]any) {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		var body map[string]any
		if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
			t.Fatalf("%s: %v %s", path, err, rec.Body)
		}
		return rec.Code, body
	}
	if code, body := get("/healthz"); code != 200 || body["nodeEligible"] != true || body["lastUpdated"] != "1970-01-01T00:33:20Z" {
		t.Errorf("/healthz healthy: %d %v", code, body)
	}
	eligible = false
	if code, _ := get("/healthz"); code != 503 {
		t.Errorf("/healthz of a node being deleted: %d, want 503", code)
	}
	if code, body := get("/livez"); code != 200 || body["nodeEligible"] != nil {
		t.Errorf("/livez ignores eligibility: %d %v", code, body)
	}
	tr.Queued()
	now = now.Add(2 * time.Minute)
	if code, _ := get("/livez"); code != 503 {
		t.Errorf("/livez with a change 2 min old: %d, want 503", code)
	}
}

// TestHealthCheckPorts: a port per Service, 200 with a local ready endpoint and 503 without,
// counts updated in place, a Service gone closes its port, a taken port is an error that does
// not stop the others.
func TestHealthCheckPorts(t *testing.T) {
	var mu sync.Mutex
	addrs := map[int32]string{}
	p := &HealthCheckPorts{Tracker: NewTracker(time.Minute), Listen: func(port int32) (net.Listener, error) {
		if port == 9 {
			return nil, &net.OpError{Op: "listen", Err: io.ErrClosedPipe}
		}
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err == nil {
			mu.Lock()
			addrs[port] = l.Addr().String()
			mu.Unlock()
		}
		return l, err
	}}
	defer p.Close()
	get := func(port int32) (int, string, string) {
		t.Helper()
		mu.Lock()
		a := addrs[port]
		mu.Unlock()
		resp, err := http.Get("http://" + a + "/healthz")
		if err != nil {
			return 0, "", err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header.Get("X-Load-Balancing-Endpoint-Weight"), string(b)
	}
	if err := p.Sync([]ServiceHealth{{Namespace: "ns", Name: "web", Port: 30100, LocalEndpoints: 2}, {Namespace: "ns", Name: "none", Port: 30101}}); err != nil {
		t.Fatal(err)
	}
	if code, weight, body := get(30100); code != 200 || weight != "2" ||
		!strings.Contains(body, `"service":{"namespace":"ns","name":"web"},"localEndpoints":2,"serviceProxyHealthy":true`) {
		t.Errorf("web: %d weight %q %s", code, weight, body)
	}
	if code, _, body := get(30101); code != 503 || !strings.Contains(body, `"localEndpoints":0`) {
		t.Errorf("no local endpoint: %d %s, want 503", code, body)
	}
	err := p.Sync([]ServiceHealth{{Namespace: "ns", Name: "web", Port: 30100}, {Namespace: "ns", Name: "taken", Port: 9, LocalEndpoints: 1}})
	if err == nil || !strings.Contains(err.Error(), "health check node port 9 of Service ns/taken") {
		t.Errorf("a taken port: %v", err)
	}
	if code, weight, _ := get(30100); code != 503 || weight != "0" {
		t.Errorf("web with only terminating endpoints left: %d weight %q, want 503", code, weight)
	}
	if code, _, msg := get(30101); code != 0 {
		t.Errorf("a Service gone: its port still answers %d %s", code, msg)
	}
}

// The status port answers /proxyMode with kovn's name, 200; other paths 404.
func TestStatusHandlerProxyMode(t *testing.T) {
	srv := httptest.NewServer(StatusHandler())
	defer srv.Close()
	for path, want := range map[string]int{"/proxyMode": http.StatusOK, "/metricz": http.StatusNotFound} {
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != want || (want == http.StatusOK && string(body) != ProxyMode) {
			t.Errorf("GET %s = %d %q, want %d", path, resp.StatusCode, body, want)
		}
	}
}
