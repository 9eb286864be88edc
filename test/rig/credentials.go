package rig

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	authnv1 "k8s.io/api/authentication/v1"
	authzv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// kovn's components authenticate as their own ServiceAccounts, as they do in a real cluster:
// only kube-controller-manager, the scheduler and the tests use admin credentials.
const (
	KovnNamespace            = "kube-system"
	ControllerServiceAccount = "kovn-controller"
	DaemonServiceAccount     = "kovn-daemon"
	SpeakerServiceAccount    = "kovn-speaker"
	// NodeNameExtra is the user extra a Node-bound (or DaemonSet pod) token carries.
	NodeNameExtra = "authentication.kubernetes.io/node-name"
)

// ControllerKubeconfig is kovn-controller's kubeconfig in cluster cl; DaemonKubeconfig that of
// node n's kovn-daemon. Both reach the apiserver at its fabric address (inside the rig).
func (c Config) ControllerKubeconfig(cl int) string {
	return filepath.Join(c.ClusterDir(cl), "kovn-controller.kubeconfig")
}
func (c Config) DaemonKubeconfig(cl, n int) string {
	return filepath.Join(c.NodeDir(cl, n), "kovn-daemon.kubeconfig")
}

// SpeakerKubeconfig is node n's kovn-speaker kubeconfig.
func (c Config) SpeakerKubeconfig(cl, n int) string {
	return filepath.Join(c.NodeDir(cl, n), "kovn-speaker.kubeconfig")
}

// RestConfigAs returns a client config that authenticates as kubeconfig does (e.g. a
// component's) but reaches the cluster's apiserver through the host forwarder, for tests.
func (s *State) RestConfigAs(cluster, kubeconfig string) (*rest.Config, error) {
	addr, ok := s.Forwards[cluster+"/apiserver"]
	if !ok {
		return nil, fmt.Errorf("no cluster %q in this rig", cluster)
	}
	rc, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, err
	}
	rc.Host, rc.Timeout = "https://"+addr, 10*time.Second
	return rc, nil
}

// Credentials is one component's identity: `kovn-rig credentials` mints its token with the
// TokenRequest API and writes a kubeconfig whose tokenFile client-go re-reads, so renewing the
// token needs no restart of the component.
type Credentials struct {
	AdminKubeconfig string
	ServiceAccount  string // in KovnNamespace
	Node            string // bind the token to this Node, as a DaemonSet pod's token is
	ApplyChartWith  string // helm: first apply the chart's ServiceAccounts, RBAC and policies
	// ClustersetTLSDir: also apply the InterConnect's TLS Secret from this identity directory.
	ClustersetTLSDir string
	Lifetime         time.Duration // requested token lifetime; renewed at 80 % of it
	Out              string        // kubeconfig path; the token goes to Out + ".token"
}

// Run writes the kubeconfig and returns; with renew it then keeps the token fresh until ctx ends.
func (cr Credentials) Run(ctx context.Context, renew bool) error {
	admin, err := clientcmd.BuildConfigFromFlags("", cr.AdminKubeconfig)
	if err != nil {
		return err
	}
	admin.Timeout = 10 * time.Second
	kc, err := kubernetes.NewForConfig(admin)
	if err != nil {
		return err
	}
	if cr.ApplyChartWith != "" {
		dyn, err := dynamic.NewForConfig(admin)
		if err != nil {
			return err
		}
		// kube-system appears shortly after the apiserver turns ready: retry until it does.
		if err := retry(ctx, func() error { return applyAccess(ctx, dyn, cr.ApplyChartWith) }); err != nil {
			return err
		}
	}
	if cr.ClustersetTLSDir != "" {
		if err := retry(ctx, func() error { return applyClustersetSecret(ctx, kc, OVSDBTLS{Dir: cr.ClustersetTLSDir}) }); err != nil {
			return err
		}
	}
	for {
		var expires time.Time
		if err := retry(ctx, func() (err error) { expires, err = cr.refresh(ctx, admin, kc); return err }); err != nil {
			return err
		}
		if !renew {
			return nil
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(renewAfter(time.Now(), expires)):
		}
	}
}

// refresh mints a token, checks the apiserver accepts it as the component with its permissions
// in force, then writes it and the kubeconfig. Checking first matters: the component starts as
// soon as its kubeconfig exists, and RBAC informers lag the objects by a moment.
func (cr Credentials) refresh(ctx context.Context, admin *rest.Config, kc kubernetes.Interface) (time.Time, error) {
	token, expires, err := mintToken(ctx, kc, cr.ServiceAccount, cr.Node, cr.Lifetime)
	if err != nil {
		return time.Time{}, err
	}
	as := rest.AnonymousClientConfig(admin)
	as.BearerToken = token
	if err := verifyIdentity(ctx, as, cr.ServiceAccount, cr.Node); err != nil {
		return time.Time{}, err
	}
	if err := writeFileAtomic(cr.Out+".token", []byte(token), 0o600); err != nil {
		return time.Time{}, err
	}
	return expires, writeTokenKubeconfig(cr.AdminKubeconfig, cr.Out, cr.ServiceAccount, cr.Out+".token")
}

// renewAfter is when to renew a token that expires at expires: at 80 % of its remaining life,
// as kubelet does for projected tokens, but never sooner than a minute (no hot loop on a token
// that is already expiring, or an apiserver that returned no expiry).
func renewAfter(now, expires time.Time) time.Duration {
	return max(expires.Sub(now)*8/10, time.Minute)
}

func mintToken(ctx context.Context, kc kubernetes.Interface, sa, node string, lifetime time.Duration) (string, time.Time, error) {
	secs := int64(lifetime.Seconds())
	req := &authnv1.TokenRequest{Spec: authnv1.TokenRequestSpec{ExpirationSeconds: &secs}}
	if node != "" {
		n, err := kc.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		if err != nil {
			return "", time.Time{}, fmt.Errorf("node %s (its kubelet registers it): %w", node, err)
		}
		req.Spec.BoundObjectRef = &authnv1.BoundObjectReference{Kind: "Node", APIVersion: "v1", Name: node, UID: n.UID}
	}
	tr, err := kc.CoreV1().ServiceAccounts(KovnNamespace).CreateToken(ctx, sa, req, metav1.CreateOptions{})
	if err != nil {
		return "", time.Time{}, fmt.Errorf("token for %s/%s: %w", KovnNamespace, sa, err)
	}
	return tr.Status.Token, tr.Status.ExpirationTimestamp.Time, nil
}

// writeTokenKubeconfig writes a kubeconfig for the admin kubeconfig's cluster that
// authenticates with the token in tokenFile.
func writeTokenKubeconfig(adminPath, out, user, tokenFile string) error {
	admin, err := clientcmd.LoadFromFile(adminPath)
	if err != nil {
		return err
	}
	cur := admin.Contexts[admin.CurrentContext]
	if cur == nil || admin.Clusters[cur.Cluster] == nil {
		return fmt.Errorf("%s: no current context with a cluster", adminPath)
	}
	if tokenFile, err = filepath.Abs(tokenFile); err != nil { // clientcmd resolves relative paths against the kubeconfig's dir
		return err
	}
	kc := clientcmdapi.NewConfig()
	kc.Clusters[cur.Cluster] = admin.Clusters[cur.Cluster]
	kc.AuthInfos[user] = &clientcmdapi.AuthInfo{TokenFile: tokenFile}
	kc.Contexts[cur.Cluster] = &clientcmdapi.Context{Cluster: cur.Cluster, AuthInfo: user}
	kc.CurrentContext = cur.Cluster
	b, err := clientcmd.Write(*kc)
	if err != nil {
		return err
	}
	return writeFileAtomic(out, b, 0o600)
}

// verifyIdentity asks the apiserver who rc is and whether its role is in force.
func verifyIdentity(ctx context.Context, rc *rest.Config, sa, node string) error {
	kc, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return err
	}
	who, err := kc.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authnv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		return err
	}
	u := who.Status.UserInfo
	if want := "system:serviceaccount:" + KovnNamespace + ":" + sa; u.Username != want {
		return fmt.Errorf("apiserver sees %q, want %q", u.Username, want)
	}
	if got := u.Extra[NodeNameExtra]; node != "" && (len(got) != 1 || got[0] != node) {
		return fmt.Errorf("token bound to Node %s carries %s=%v (ServiceAccountTokenNodeBinding off?)", node, NodeNameExtra, got)
	}
	// Both roles may watch Nodes: allowed means the binding has reached the authorizer.
	ssar := &authzv1.SelfSubjectAccessReview{Spec: authzv1.SelfSubjectAccessReviewSpec{
		ResourceAttributes: &authzv1.ResourceAttributes{Verb: "watch", Resource: "nodes"}}}
	res, err := kc.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, ssar, metav1.CreateOptions{})
	if err != nil {
		return err
	}
	if !res.Status.Allowed {
		return fmt.Errorf("%s may not watch nodes yet (RBAC not in force): %s", sa, res.Status.Reason)
	}
	return nil
}

func writeFileAtomic(path string, b []byte, mode os.FileMode) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, mode); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// retry calls f every half second until it succeeds or ctx ends, returning the last error.
func retry(ctx context.Context, f func() error) error {
	for {
		err := f()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (last error: %v)", ctx.Err(), err)
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// credentialsStep runs `kovn-rig credentials --renew` for one component; the component's own
// step follows it and starts once the kubeconfig exists. A kubeconfig left by an earlier rig in
// the same dir is removed first so the step cannot look ready before it has written its own.
func (c Config) credentialsStep(name, logDir string, cr Credentials) Step {
	for _, f := range []string{cr.Out, cr.Out + ".token"} {
		_ = os.Remove(f)
	}
	argv := []string{filepath.Join(c.KovnBinDir, "kovn-rig"), "credentials", "--renew",
		"--admin-kubeconfig=" + cr.AdminKubeconfig, "--service-account=" + cr.ServiceAccount, "--out=" + cr.Out}
	if cr.Node != "" {
		argv = append(argv, "--node="+cr.Node)
	}
	if cr.ApplyChartWith != "" {
		argv = append(argv, "--apply-chart-with="+cr.ApplyChartWith)
	}
	if cr.ClustersetTLSDir != "" {
		argv = append(argv, "--clusterset-tls-dir="+cr.ClustersetTLSDir)
	}
	return Step{Name: name, Argv: argv, Daemon: true, Restart: true, Log: filepath.Join(logDir, name+".log"),
		Ready: Ready{File: cr.Out}, Timeout: 90 * time.Second}
}
