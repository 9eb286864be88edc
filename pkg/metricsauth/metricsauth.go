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
	"fmt"
	"net/http"
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
