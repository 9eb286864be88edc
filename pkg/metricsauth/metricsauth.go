// Package metricsauth puts kovn's metrics behind the cluster's own identities, as the kubelet
// and kube-rbac-proxy do: a scrape is served only over TLS, with a bearer token the apiserver
// authenticates (TokenReview) for a user allowed to get the path (SubjectAccessReview on the
// non-resource URL, e.g. /metrics). Metrics name pods, addresses, peers and clusters; kovn's
// components listen on host-network addresses that any pod reaches, so without this any pod
// of any tenant could read them.
package metricsauth

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	authnv1 "k8s.io/api/authentication/v1"
	authzv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/kovn/kovn/pkg/pki"
)

// +kubebuilder:rbac:groups=authentication.k8s.io,resources=tokenreviews,verbs=create
// +kubebuilder:rbac:groups=authorization.k8s.io,resources=subjectaccessreviews,verbs=create

// CacheTTL is how long a review that let a token in serves the same token and path: a
// Prometheus scraping every 15 s costs the apiserver two reviews a minute, and a revoked right
// stops working within it. DenyCacheTTL is the same for a refusal, short so that a right just
// granted works within seconds (the apiserver's own delegating authorizer keeps both apart too).
const (
	CacheTTL     = time.Minute
	DenyCacheTTL = 5 * time.Second
)

// Reviewer admits requests whose bearer token may get their path.
type Reviewer struct {
	Client kubernetes.Interface

	mu    sync.Mutex
	cache map[[sha256.Size]byte]verdict
}

type verdict struct {
	status int // http.StatusOK, StatusUnauthorized or StatusForbidden
	until  time.Time
}

// Wrap serves next only to requests the apiserver says may get their path.
func (r *Reviewer) Wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		token, ok := strings.CutPrefix(req.Header.Get("Authorization"), "Bearer ")
		if !ok || token == "" {
			http.Error(w, "Unauthorized: send a bearer token of a user that may get "+req.URL.Path, http.StatusUnauthorized)
			return
		}
		status, err := r.review(req.Context(), token, req.URL.Path)
		switch {
		case err != nil:
			http.Error(w, "reviewing the token: "+err.Error(), http.StatusInternalServerError)
		case status == http.StatusUnauthorized:
			http.Error(w, "Unauthorized: the apiserver did not authenticate the token", status)
		case status == http.StatusForbidden:
			http.Error(w, "Forbidden: the token's user may not get "+req.URL.Path, status)
		default:
			next.ServeHTTP(w, req)
		}
	})
}

// review asks the apiserver (or the cache) whether token may get path; errors are not cached.
func (r *Reviewer) review(ctx context.Context, token, path string) (int, error) {
	key := sha256.Sum256([]byte(token + "\x00" + path))
	now := time.Now()
	r.mu.Lock()
	v, ok := r.cache[key]
	r.mu.Unlock()
	if ok && now.Before(v.until) {
		return v.status, nil
	}
	status, err := r.ask(ctx, token, path)
	if err != nil {
		return 0, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cache == nil || len(r.cache) > 1000 { // many distinct tokens: start over rather than grow
		r.cache = map[[sha256.Size]byte]verdict{}
	}
	ttl := CacheTTL
	if status != http.StatusOK {
		ttl = DenyCacheTTL
	}
	r.cache[key] = verdict{status: status, until: now.Add(ttl)}
	return status, nil
}

func (r *Reviewer) ask(ctx context.Context, token, path string) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	tr, err := r.Client.AuthenticationV1().TokenReviews().Create(ctx,
		&authnv1.TokenReview{Spec: authnv1.TokenReviewSpec{Token: token}}, metav1.CreateOptions{})
	if err != nil {
		return 0, fmt.Errorf("TokenReview: %w", err)
	}
	if !tr.Status.Authenticated {
		return http.StatusUnauthorized, nil
	}
	u := tr.Status.User
	extra := map[string]authzv1.ExtraValue{}
	for k, v := range u.Extra {
		extra[k] = authzv1.ExtraValue(v)
	}
	sar, err := r.Client.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authzv1.SubjectAccessReview{Spec: authzv1.SubjectAccessReviewSpec{
		User: u.Username, UID: u.UID, Groups: u.Groups, Extra: extra,
		NonResourceAttributes: &authzv1.NonResourceAttributes{Path: path, Verb: "get"},
	}}, metav1.CreateOptions{})
	if err != nil {
		return 0, fmt.Errorf("SubjectAccessReview: %w", err)
	}
	if !sar.Status.Allowed {
		return http.StatusForbidden, nil
	}
	return http.StatusOK, nil
}

// FlagUsage describes each component's --metrics-secure flag.
const FlagUsage = "serve metrics over TLS to bearer tokens allowed to get the path (TokenReview and SubjectAccessReview); " +
	"false serves plain HTTP to anyone who reaches the address: insecure unless it is a loopback address"

// ServerOptions are controller-runtime's metrics server options: with secure, TLS (a
// self-signed certificate made at start) and the reviews above; without, plain HTTP for a
// loopback address (the process lab's), which the docs call the insecure choice.
func ServerOptions(addr string, secure bool) metricsserver.Options {
	o := metricsserver.Options{BindAddress: addr}
	if secure {
		o.SecureServing = true
		o.FilterProvider = func(c *rest.Config, hc *http.Client) (metricsserver.Filter, error) {
			kc, err := kubernetes.NewForConfigAndClient(c, hc)
			if err != nil {
				return nil, err
			}
			r := &Reviewer{Client: kc}
			return func(_ logr.Logger, h http.Handler) (http.Handler, error) { return r.Wrap(h), nil }, nil
		}
	}
	return o
}

// SelfSignedTLS is a server TLS configuration with a certificate made now, for components
// serving metrics without controller-runtime. Scrapers verify the token's rights, not the
// server's name (as with the kubelet's self-signed serving certificate).
func SelfSignedTLS() (*tls.Config, error) {
	host, _ := os.Hostname()
	ca, err := pki.NewCA("kovn metrics "+host, 365*24*time.Hour)
	if err != nil {
		return nil, err
	}
	certPEM, keyPEM, err := ca.Issue(pki.Request{CommonName: host, DNSNames: []string{host}, Usage: pki.Server, Validity: 365 * 24 * time.Hour})
	if err != nil {
		return nil, err
	}
	pair, err := tls.X509KeyPair(append(certPEM, ca.CertPEM...), keyPEM)
	if err != nil {
		return nil, err
	}
	return &tls.Config{Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12}, nil
}

// Server is an http.Server for metrics: over TLS to the tokens r admits (secure), or plain
// HTTP (a loopback address: kubectl-kovn reads it through pods/exec, see FetchLocal).
func Server(addr string, h http.Handler, secure bool, r *Reviewer) (*http.Server, error) {
	s := &http.Server{Addr: addr, Handler: h, ReadHeaderTimeout: 5 * time.Second}
	if !secure {
		return s, nil
	}
	cfg, err := SelfSignedTLS()
	if err != nil {
		return nil, err
	}
	s.TLSConfig, s.Handler = cfg, r.Wrap(h)
	return s, nil
}

// ListenAndServe runs s over TLS when it has a TLS configuration (Server), else plain.
func ListenAndServe(s *http.Server) error {
	if s.TLSConfig != nil {
		return s.ListenAndServeTLS("", "")
	}
	return s.ListenAndServe()
}

// GetMetricsFlag is the flag with which kovn-pinger and kovn-ovn-monitor print the metrics of
// their plain loopback listener and exit: what kubectl-kovn runs in their pods (pods/exec, a
// right of the cluster's operators), since the API server's pods/proxy passes no token on.
const GetMetricsFlag = "get-metrics"

// PrintLocal writes what FetchLocal reads to stdout: the --get-metrics of kovn-pinger and
// kovn-ovn-monitor.
func PrintLocal(addr string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	body, err := FetchLocal(ctx, addr)
	_, _ = os.Stdout.Write(body)
	return err
}

// FetchLocal reads /metrics from addr (a loopback host:port; an empty host is 127.0.0.1).
func FetchLocal(ctx context.Context, addr string) ([]byte, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	if host == "" {
		host = "127.0.0.1"
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+net.JoinHostPort(host, port)+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err == nil && resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("%s: %s", resp.Status, strings.TrimSpace(string(body)))
	}
	return body, err
}
