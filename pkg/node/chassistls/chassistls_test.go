package chassistls

import (
	"context"
	"crypto/tls"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	certv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/kovn/kovn/pkg/cluster/ovnpki"
	"github.com/kovn/kovn/pkg/ovn/ovntest"
	"github.com/kovn/kovn/pkg/pki"
)

const (
	ns         = "kube-system"
	daemonUser = "system:serviceaccount:kube-system:kovn-daemon"
)

// apiserver stands in for what the real one adds to a CSR (the requester's user and the node
// its token is bound to) and runs kovn-controller's signer on each new request.
type apiserver struct {
	client.Client
	tokenNode string
	signer    *ovnpki.Signer
	created   int
}

func (a *apiserver) Create(ctx context.Context, obj client.Object, opts ...client.CreateOption) error {
	csr := obj.(*certv1.CertificateSigningRequest)
	csr.Spec.Username, csr.Spec.Extra = daemonUser, map[string]certv1.ExtraValue{ovnpki.NodeNameExtra: {a.tokenNode}}
	if err := a.Client.Create(ctx, obj, opts...); err != nil {
		return err
	}
	a.created++
	_, err := a.signer.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(obj)})
	return err
}

func setup(t *testing.T, node, tokenNode string) (*Requester, *apiserver) {
	t.Helper()
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	c := fake.NewClientBuilder().WithScheme(scheme).WithStatusSubresource(&certv1.CertificateSigningRequest{}).Build()
	auth, err := ovnpki.Ensure(context.Background(), c, ovnpki.Config{Namespace: ns})
	if err != nil {
		t.Fatal(err)
	}
	signer := &ovnpki.Signer{Client: c, DaemonUser: daemonUser}
	signer.SetCA(auth.Chassis)
	api := &apiserver{Client: c, tokenNode: tokenNode, signer: signer}
	ovs, _ := ovntest.ServeOVS(t, "br-int", nil)
	return &Requester{Reader: c, Writer: api, OVS: ovs, Node: node, Namespace: ns, Dir: filepath.Join(t.TempDir(), "chassis-tls"),
		Validity: 24 * time.Hour, SignTimeout: 5 * time.Second, Log: logr.Discard()}, api
}

// sslFiles waits until the client's cache shows the SSL row pointing at dir's files.
func sslFiles(t *testing.T, r *Requester, notDir string) string {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		ssl, err := currentSSL(context.Background(), r.OVS)
		if err == nil && ssl != nil && filepath.Dir(ssl.Certificate) != notDir {
			dir := filepath.Dir(ssl.Certificate)
			if ssl.PrivateKey != filepath.Join(dir, KeyFile) || ssl.CaCert != filepath.Join(dir, CAFile) {
				t.Fatalf("SSL row mixes directories: %+v", ssl)
			}
			return dir
		}
		if time.Now().After(deadline) {
			t.Fatalf("SSL row not set (last %+v, %v)", ssl, err)
		}
	}
}

func TestEnsureGetsTheNodeItsOwnCertificate(t *testing.T) {
	r, api := setup(t, "c1-n1", "c1-n1")
	ctx := context.Background()
	if _, err := r.Ensure(ctx); err != nil {
		t.Fatal(err)
	}
	dir := sslFiles(t, r, "")
	pair, err := tls.LoadX509KeyPair(filepath.Join(dir, CertFile), filepath.Join(dir, KeyFile))
	if err != nil {
		t.Fatal(err)
	}
	if pair.Leaf.Subject.CommonName != "c1-n1" {
		t.Errorf("CN %q", pair.Leaf.Subject.CommonName)
	}
	if st, _ := os.Stat(filepath.Join(dir, KeyFile)); st.Mode().Perm() != 0o600 {
		t.Errorf("key file mode %v", st.Mode().Perm())
	}
	var cm corev1.ConfigMap
	_ = r.Reader.Get(ctx, client.ObjectKey{Namespace: ns, Name: ovnpki.CAConfigMap}, &cm)
	if ca, _ := os.ReadFile(filepath.Join(dir, CAFile)); string(ca) != cm.Data[ovnpki.KeyCA] {
		t.Error("ca.crt is not the central CA of the ConfigMap")
	}
	due, err := r.Ensure(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if api.created != 1 {
		t.Errorf("%d CSRs for a certificate not due, want 1", api.created)
	}
	if want := pair.Leaf.NotBefore.Add(pair.Leaf.NotAfter.Sub(pair.Leaf.NotBefore) / 2); !due.Equal(want) {
		t.Errorf("renewal at %s, want %s", due, want)
	}

	// A new central CA: a new directory with it, the old one gone, the row moved as a whole.
	other, _ := pki.NewCA("another central CA", time.Hour)
	cm.Data[ovnpki.KeyCA] = string(other.CertPEM)
	if err := r.Writer.Update(ctx, &cm); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(5 * time.Second); api.created < 2; time.Sleep(10 * time.Millisecond) {
		if _, err := r.Ensure(ctx); err != nil {
			t.Fatal(err)
		}
		if time.Now().After(deadline) {
			t.Fatal("no new certificate for a new CA")
		}
	}
	next := sslFiles(t, r, dir)
	if ca, _ := os.ReadFile(filepath.Join(next, CAFile)); string(ca) != string(other.CertPEM) {
		t.Error("the new directory lacks the new CA")
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("old certificate directory left: %v", err)
	}
}

func TestEnsureReportsARefusal(t *testing.T) {
	r, _ := setup(t, "c1-n2", "c1-n1") // kovn-daemon of c1-n1 claiming to be c1-n2
	_, err := r.Ensure(context.Background())
	if err == nil || !strings.Contains(err.Error(), "denied") || !strings.Contains(err.Error(), `chassis "c1-n2" from node "c1-n1"`) {
		t.Fatalf("error %v, want the signer's refusal", err)
	}
	if ssl, _ := currentSSL(context.Background(), r.OVS); ssl != nil {
		t.Errorf("SSL row set without a certificate: %+v", ssl)
	}
}
