package ovnpki

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"slices"
	"sync"
	"time"

	certv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	"github.com/kovn/kovn/pkg/pki"
)

// SignerName is the CertificateSigningRequest signer of chassis certificates.
const SignerName = "kovn.io/ovn-chassis"

// NodeNameExtra is the user-info extra the apiserver gives a ServiceAccount token bound to a
// pod (or a node): the node it runs on. kovn-daemon's token carries its own node there, and no
// other node's, so a node can ask for its own chassis identity only.
const NodeNameExtra = "authentication.kubernetes.io/node-name"

// Chassis certificate lifetimes: what a CSR's expirationSeconds may ask for.
const (
	MaxChassisValidity     = 30 * 24 * time.Hour
	DefaultChassisValidity = MaxChassisValidity
	minChassisValidity     = time.Hour
)

// +kubebuilder:rbac:groups=certificates.k8s.io,resources=certificatesigningrequests,verbs=get;list;watch
// +kubebuilder:rbac:groups=certificates.k8s.io,resources=certificatesigningrequests/approval;certificatesigningrequests/status,verbs=update
// +kubebuilder:rbac:groups=certificates.k8s.io,resources=signers,resourceNames=kovn.io/ovn-chassis,verbs=approve;sign

// Verdict is what the signer decides on a request.
type Verdict struct {
	Approve bool
	// Node is the chassis (node) name the certificate is for, when approved.
	Node string
	// Reason and Message go into the Approved or Denied condition.
	Reason, Message string
}

// Judge decides a chassis CSR: it is approved only when its requester is kovn-daemon
// (daemonUser) on node N, by its token's node binding, and the request asks for nothing but a
// client certificate with CN = N and an ECDSA P-256 key. Pure: it reads only the CSR.
func Judge(csr *certv1.CertificateSigningRequest, daemonUser string) Verdict {
	deny := func(format string, args ...any) Verdict {
		return Verdict{Reason: "KovnChassisRefused", Message: fmt.Sprintf(format, args...)}
	}
	s := csr.Spec
	if s.SignerName != SignerName {
		return deny("signer %q is not %s", s.SignerName, SignerName)
	}
	if s.Username != daemonUser {
		return deny("requested by %q: only %s asks for chassis certificates", s.Username, daemonUser)
	}
	nodes := s.Extra[NodeNameExtra]
	if len(nodes) != 1 || nodes[0] == "" {
		return deny("the requester's token is not bound to one node (user extra %s = %v)", NodeNameExtra, []string(nodes))
	}
	node := nodes[0]
	req, err := parseRequest(s.Request)
	if err != nil {
		return deny("%v", err)
	}
	if req.Subject.CommonName != node {
		return deny("asks for chassis %q from node %q: a node gets its own name only", req.Subject.CommonName, node)
	}
	if len(req.DNSNames)+len(req.IPAddresses)+len(req.EmailAddresses)+len(req.URIs) > 0 ||
		len(req.Subject.Organization)+len(req.Subject.OrganizationalUnit) > 0 {
		return deny("asks for names beyond the common name %q", node)
	}
	if pub, ok := req.PublicKey.(*ecdsa.PublicKey); !ok || pub.Curve != elliptic.P256() {
		return deny("the key is not ECDSA P-256")
	}
	allowed := []certv1.KeyUsage{certv1.UsageDigitalSignature, certv1.UsageClientAuth}
	if !slices.Contains(s.Usages, certv1.UsageClientAuth) {
		return deny("usages %v lack client auth", s.Usages)
	}
	for _, u := range s.Usages {
		if !slices.Contains(allowed, u) {
			return deny("usage %q is not allowed (only digital signature and client auth)", u)
		}
	}
	return Verdict{Approve: true, Node: node, Reason: "KovnChassisIdentity",
		Message: fmt.Sprintf("kovn-daemon of node %s asks for its own chassis identity", node)}
}

func parseRequest(b []byte) (*x509.CertificateRequest, error) {
	blk, _ := pem.Decode(b)
	if blk == nil || blk.Type != "CERTIFICATE REQUEST" {
		return nil, fmt.Errorf("spec.request is not a PEM CERTIFICATE REQUEST")
	}
	req, err := x509.ParseCertificateRequest(blk.Bytes)
	if err != nil {
		return nil, fmt.Errorf("spec.request: %w", err)
	}
	if err := req.CheckSignature(); err != nil {
		return nil, fmt.Errorf("spec.request is not signed by its key: %w", err)
	}
	return req, nil
}

// chassisValidity is what the CSR asks for, within the signer's bounds.
func chassisValidity(csr *certv1.CertificateSigningRequest) time.Duration {
	if csr.Spec.ExpirationSeconds == nil {
		return DefaultChassisValidity
	}
	return min(max(time.Duration(*csr.Spec.ExpirationSeconds)*time.Second, minChassisValidity), MaxChassisValidity)
}

// Signer approves and signs chassis CSRs with the chassis CA. Approval by anyone else (an
// admin's `kubectl certificate approve`) does not make it sign a request Judge refuses.
type Signer struct {
	Client client.Client
	// DaemonUser is kovn-daemon's ServiceAccount user name.
	DaemonUser string

	mu sync.Mutex
	ca *pki.CA
}

// SetCA gives the signer the chassis CA (again after a change).
func (s *Signer) SetCA(ca *pki.CA) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ca = ca
}

func (s *Signer) currentCA() *pki.CA {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ca
}

// SetupWithManager watches the CSRs of SignerName only.
func (s *Signer) SetupWithManager(mgr ctrl.Manager) error {
	ours := predicate.NewPredicateFuncs(func(o client.Object) bool {
		csr, ok := o.(*certv1.CertificateSigningRequest)
		return ok && csr.Spec.SignerName == SignerName
	})
	return ctrl.NewControllerManagedBy(mgr).Named("ovn-chassis-signer").
		For(&certv1.CertificateSigningRequest{}, builder.WithPredicates(ours)).Complete(s)
}

// Reconcile decides and signs one CSR; a decided or signed one is left alone.
func (s *Signer) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var csr certv1.CertificateSigningRequest
	if err := s.Client.Get(ctx, req.NamespacedName, &csr); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if csr.Spec.SignerName != SignerName || len(csr.Status.Certificate) > 0 ||
		HasCondition(&csr, certv1.CertificateDenied) || HasCondition(&csr, certv1.CertificateFailed) {
		return ctrl.Result{}, nil
	}
	v := Judge(&csr, s.DaemonUser)
	if !HasCondition(&csr, certv1.CertificateApproved) {
		typ := certv1.CertificateApproved
		if !v.Approve {
			typ = certv1.CertificateDenied
		}
		csr.Status.Conditions = append(csr.Status.Conditions, certv1.CertificateSigningRequestCondition{Type: typ,
			Status: corev1.ConditionTrue, Reason: v.Reason, Message: v.Message, LastUpdateTime: metav1.Now()})
		if err := s.Client.SubResource("approval").Update(ctx, &csr); err != nil || !v.Approve {
			return ctrl.Result{}, err
		}
	}
	if !v.Approve { // approved by someone else: the signer still refuses
		return ctrl.Result{}, s.fail(ctx, &csr, v.Message)
	}
	ca := s.currentCA()
	if ca == nil {
		return ctrl.Result{RequeueAfter: time.Second}, nil
	}
	parsed, err := parseRequest(csr.Spec.Request)
	if err != nil {
		return ctrl.Result{}, s.fail(ctx, &csr, err.Error())
	}
	certPEM, err := ca.Sign(parsed.PublicKey, pki.Request{CommonName: v.Node, Usage: pki.Client, Validity: chassisValidity(&csr)})
	if err != nil {
		return ctrl.Result{}, err
	}
	csr.Status.Certificate = certPEM
	return ctrl.Result{}, s.Client.Status().Update(ctx, &csr)
}

func (s *Signer) fail(ctx context.Context, csr *certv1.CertificateSigningRequest, msg string) error {
	csr.Status.Conditions = append(csr.Status.Conditions, certv1.CertificateSigningRequestCondition{Type: certv1.CertificateFailed,
		Status: corev1.ConditionTrue, Reason: "KovnChassisRefused", Message: msg, LastUpdateTime: metav1.Now()})
	return s.Client.Status().Update(ctx, csr)
}

// HasCondition reports whether csr carries condition t with status True.
func HasCondition(csr *certv1.CertificateSigningRequest, t certv1.RequestConditionType) bool {
	return slices.ContainsFunc(csr.Status.Conditions, func(c certv1.CertificateSigningRequestCondition) bool {
		return c.Type == t && c.Status == corev1.ConditionTrue
	})
}
