package metricsauth

import (
	"context"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	authnv1 "k8s.io/api/authentication/v1"
	authzv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// TestWrap: no token and an unknown token get 401, a user without get on the path 403, the
// reader the metrics; the reviews carry the token's user and the path, and answers are cached.
func TestWrap(t *testing.T) {
	kc := fake.NewClientset()
	users := map[string]string{"reader-token": "system:serviceaccount:monitoring:prometheus", "tenant-token": "alice"}
	readers := map[string]bool{"system:serviceaccount:monitoring:prometheus": true}
	var mu sync.Mutex // the maps change between requests, which the server's goroutines read
	var reviews int
	kc.PrependReactor("create", "tokenreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
		mu.Lock()
		defer mu.Unlock()
		reviews++
		tr := a.(k8stesting.CreateAction).GetObject().(*authnv1.TokenReview)
		if u, ok := users[tr.Spec.Token]; ok {
			tr.Status = authnv1.TokenReviewStatus{Authenticated: true, User: authnv1.UserInfo{Username: u, Groups: []string{"system:authenticated"}}}
		}
		return true, tr, nil
	})
	kc.PrependReactor("create", "subjectaccessreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
		mu.Lock()
		defer mu.Unlock()
		sar := a.(k8stesting.CreateAction).GetObject().(*authzv1.SubjectAccessReview)
		na := sar.Spec.NonResourceAttributes
		sar.Status.Allowed = readers[sar.Spec.User] && na != nil && na.Path == "/metrics" && na.Verb == "get"
		return true, sar, nil
	})
	r := &Reviewer{Client: kc}
	srv := httptest.NewServer(r.Wrap(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "kovn_up 1\n") })))
	defer srv.Close()
	get := func(path, token string) (int, string) {
		req, _ := http.NewRequest(http.MethodGet, srv.URL+path, nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	for _, c := range []struct {
		path, token string
		want        int
	}{
		{"/metrics", "", http.StatusUnauthorized},
		{"/metrics", "stolen", http.StatusUnauthorized},
		{"/metrics", "tenant-token", http.StatusForbidden},
		{"/other", "reader-token", http.StatusForbidden},
		{"/metrics", "reader-token", http.StatusOK},
	} {
		if got, body := get(c.path, c.token); got != c.want {
			t.Errorf("GET %s with token %q: %d %q, want %d", c.path, c.token, got, body, c.want)
		} else if got == http.StatusOK && body != "kovn_up 1\n" {
			t.Errorf("GET %s: body %q", c.path, body)
		}
	}
	mu.Lock()
	before := reviews
	mu.Unlock()
	for range 3 {
		get("/metrics", "reader-token")
		get("/metrics", "tenant-token")
	}
	mu.Lock()
	if reviews != before {
		t.Errorf("%d more TokenReviews for tokens reviewed within CacheTTL, want none", reviews-before)
	}
	users["late-token"] = "late"
	mu.Unlock()
	// A refusal is kept for DenyCacheTTL only: the right granted, the token works soon after.
	if got, _ := get("/metrics", "late-token"); got != http.StatusForbidden {
		t.Fatalf("late-token before its right: %d", got)
	}
	mu.Lock()
	readers["late"] = true
	mu.Unlock()
	r.mu.Lock()
	for k, v := range r.cache {
		if v.status == http.StatusOK {
			continue
		}
		if left := time.Until(v.until); left > DenyCacheTTL {
			t.Errorf("a refusal is kept %s, want at most DenyCacheTTL (%s)", left, DenyCacheTTL)
		}
		v.until = time.Now().Add(-time.Second) // as if DenyCacheTTL passed
		r.cache[k] = v
	}
	r.mu.Unlock()
	if got, _ := get("/metrics", "late-token"); got != http.StatusOK {
		t.Errorf("late-token after its right was granted and DenyCacheTTL passed: %d, want 200", got)
	}
}

// TestServerAndFetchLocal: a secure Server serves TLS and reviews tokens (no token: 401); a
// plain one serves anyone, which FetchLocal reads (an empty host meaning 127.0.0.1).
func TestServerAndFetchLocal(t *testing.T) {
	h := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "kovn_up 1\n") })
	for _, secure := range []bool{true, false} {
		s, err := Server("127.0.0.1:0", h, secure, &Reviewer{Client: fake.NewClientset()})
		if err != nil {
			t.Fatal(err)
		}
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		go func() {
			if s.TLSConfig != nil {
				_ = s.ServeTLS(ln, "", "")
			} else {
				_ = s.Serve(ln)
			}
		}()
		_, port, _ := net.SplitHostPort(ln.Addr().String())
		body, err := FetchLocal(context.Background(), ":"+port)
		switch {
		case secure && (err == nil || strings.Contains(string(body), "kovn_up")):
			t.Errorf("secure server read in plain HTTP: %v %q", err, body)
		case !secure && (err != nil || string(body) != "kovn_up 1\n"):
			t.Errorf("plain server: %v %q", err, body)
		}
		if secure {
			c := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // a self-signed test server
			resp, err := c.Get("https://127.0.0.1:" + port + "/metrics")
			if err != nil || resp.StatusCode != http.StatusUnauthorized {
				t.Errorf("secure server without a token over TLS: %v %v, want 401", err, resp)
			}
			if resp != nil {
				resp.Body.Close()
			}
		}
		_ = s.Close()
	}
}
