package rig

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kovn/kovn/pkg/interconnect/ictls"
	"github.com/kovn/kovn/pkg/pki"
)

// The rig's OVN databases take mutual TLS only, as kovn's defaults do. Each database trusts
// its own CA: a cluster's SB the CA of its chassis, its NB one whose certificates no node holds
// (NB has no RBAC: a node's certificate must not open it at all), the clusterset's IC-NB,
// IC-SB and OVN_ClusterSet the clusterset's CA. Each identity is a directory shaped like a
// kubernetes.io/tls Secret (tls.crt, tls.key, ca.crt):
//
//	<cluster>/pki/ovn-sb/server   SB                         (CN ovn-sb, the control plane's addresses)
//	<cluster>/pki/ovn-sb/<node>   the node's ovn-controller (CN = chassis name, which SB RBAC matches)
//	<cluster>/pki/ovn-nb/server   NB                         (CN ovn-nb)
//	<cluster>/pki/ovn-nb/admin    an operator's NB client    (CN admin)
//	ic/pki/server                 every IC database member   (CN ovn-ic-db; server and raft peer)
//	ic/pki/az<N>, ic/pki/<foreign AZ>  an AZ's ovn-ic and kovn-controller (CN = AZ name)
//
// Components on the database's own host (northd, kovn-controller in the process rig,
// kovn-ovn-monitor, the tests' ovn-nbctl) use the servers' unix sockets: only root on that
// host reaches them.

// Validity of the rig's certificates: longer than any rig lives. Renewal is tested by
// replacing them, not by waiting.
const (
	rigCAValidity   = 365 * 24 * time.Hour
	rigCertValidity = 30 * 24 * time.Hour
)

// OVSDBTLS is one identity's directory; empty: plain TCP.
type OVSDBTLS struct{ Dir string }

func (t OVSDBTLS) Cert() string { return filepath.Join(t.Dir, "tls.crt") }
func (t OVSDBTLS) Key() string  { return filepath.Join(t.Dir, "tls.key") }
func (t OVSDBTLS) CA() string   { return filepath.Join(t.Dir, "ca.crt") }

// Args are the SSL options of OVS and OVN programs (ovsdb-server, ovn-controller, ovn-ic,
// ovn-nbctl and the other ctl tools all take them).
func (t OVSDBTLS) Args() []string {
	if t.Dir == "" {
		return nil
	}
	return []string{"--private-key=" + t.Key(), "--certificate=" + t.Cert(), "--ca-cert=" + t.CA()}
}

// ovsdbScheme is how clients dial the rig's databases over the network.
func (c Config) ovsdbScheme() string {
	if c.InsecurePlainTCP {
		return "tcp"
	}
	return "ssl"
}

func (c Config) ovnPKIDir(cl int, db string) string {
	return filepath.Join(c.ClusterDir(cl), "pki", "ovn-"+db)
}
func (c Config) icPKIDir() string { return filepath.Join(c.Dir, "ic", "pki") }

func (c Config) identity(dir string) OVSDBTLS {
	if c.InsecurePlainTCP {
		return OVSDBTLS{}
	}
	return OVSDBTLS{Dir: dir}
}

// NBServerTLS and SBServerTLS are cluster cl's NB and SB servers' identities; NBAdminTLS an
// operator's NB client; ChassisTLS node n's ovn-controller's.
func (c Config) NBServerTLS(cl int) OVSDBTLS {
	return c.identity(filepath.Join(c.ovnPKIDir(cl, "nb"), "server"))
}
func (c Config) SBServerTLS(cl int) OVSDBTLS {
	return c.identity(filepath.Join(c.ovnPKIDir(cl, "sb"), "server"))
}
func (c Config) NBAdminTLS(cl int) OVSDBTLS {
	return c.identity(filepath.Join(c.ovnPKIDir(cl, "nb"), "admin"))
}
func (c Config) ChassisTLS(cl, n int) OVSDBTLS {
	return c.identity(filepath.Join(c.ovnPKIDir(cl, "sb"), NodeName(cl, n)))
}

// ICServerTLS is the IC databases' identity; AZTLS cluster cl's as an AZ of the clusterset
// (what its ovn-ic presents, and its InterConnect's Secret holds); ForeignAZTLS the foreign AZ's.
func (c Config) ICServerTLS() OVSDBTLS { return c.identity(filepath.Join(c.icPKIDir(), "server")) }
func (c Config) AZTLS(cl int) OVSDBTLS { return c.identity(filepath.Join(c.icPKIDir(), AZName(cl))) }
func (c Config) ForeignAZTLS() OVSDBTLS {
	return c.identity(filepath.Join(c.icPKIDir(), ForeignAZName))
}

// ChartICDBTLS is the identity of the IC databases cluster 1's chart serves (ChartICDatabases),
// from the clusterset's CA: the Secret ChartICDBSecret holds it.
func (c Config) ChartICDBTLS() OVSDBTLS {
	return c.identity(filepath.Join(c.icPKIDir(), chartICDBIdentity))
}

const chartICDBIdentity = "chart-ic-db"

// ChartICDBSecret is the chart's interconnect.databases.tlsSecretName default.
const ChartICDBSecret = "kovn-clusterset-db-tls"

// AZName is cluster cl's availability zone in the rig's clusterset (its InterConnect's azName).
func AZName(cl int) string { return fmt.Sprintf("az%d", cl) }

// RenamedAZName is the name cluster cl's AZ may be renamed to: its certificate names it too.
func RenamedAZName(cl int) string { return AZName(cl) + "r" }

// caPlan is one CA of the rig's OVN PKI: its directory, its name and the identities it
// issues (directory name under dir -> request).
type caPlan struct {
	dir, cn string
	ids     map[string]pki.Request
}

// ovnPKIPlan lists the rig's CAs and what each issues.
func (c Config) ovnPKIPlan() []caPlan {
	loopback := []netip.Addr{netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("::1")}
	var plan []caPlan
	for cl := 1; cl <= c.Clusters; cl++ {
		central := append(c.ControlPlaneIPs(cl), loopback...)
		if c.Chart() {
			central = append(c.NodeIPs(cl, 1), loopback...) // the chart serves NB and SB from node 1
		}
		for _, db := range []string{"nb", "sb"} {
			ids := map[string]pki.Request{"server": {CommonName: "ovn-" + db, IPs: central, Usage: pki.Server | pki.Client}}
			if db == "nb" {
				ids["admin"] = pki.Request{CommonName: "admin", Usage: pki.Client}
			}
			for n := 1; db == "sb" && n <= c.Nodes; n++ {
				ids[NodeName(cl, n)] = pki.Request{CommonName: NodeName(cl, n), Usage: pki.Client}
			}
			plan = append(plan, caPlan{dir: c.ovnPKIDir(cl, db), cn: fmt.Sprintf("%s OVN %s CA", ClusterName(cl), db), ids: ids})
		}
	}
	if !c.Interconnected() && !c.ChartICDatabases {
		return plan
	}
	ids := map[string]pki.Request{"server": {CommonName: "ovn-ic-db", IPs: append(c.ICDBIPs(), loopback...), Usage: pki.Server | pki.Client}}
	if c.ChartICDatabases {
		ids[chartICDBIdentity] = pki.Request{CommonName: "ovn-ic-db", IPs: append(c.NodeIPs(1, 1), loopback...), Usage: pki.Server | pki.Client}
	}
	for cl := 1; cl <= c.Clusters; cl++ {
		// The DNS name is a second AZ name the certificate may act for (the IC-SB relay's
		// rule): TestInterconnect renames az1 to RenamedAZName(1).
		ids[AZName(cl)] = pki.Request{CommonName: AZName(cl), DNSNames: []string{RenamedAZName(cl)}, Usage: pki.Client}
	}
	if c.ForeignAZ {
		ids[ForeignAZName] = pki.Request{CommonName: ForeignAZName, Usage: pki.Client}
	}
	return append(plan, caPlan{dir: c.icPKIDir(), cn: "clusterset CA", ids: ids})
}

// writeOVNPKI makes the CAs and certificates above, keeping those a rig restarted in place
// already has.
func (c Config) writeOVNPKI() error {
	if c.InsecurePlainTCP {
		return nil
	}
	for _, p := range c.ovnPKIPlan() {
		ca, err := loadOrMakeCA(p.dir, p.cn)
		if err != nil {
			return err
		}
		if err := issueAll(ca, p.dir, p.ids); err != nil {
			return err
		}
	}
	return nil
}

// loadOrMakeCA reads dir's ca.crt and ca.key, or makes them.
func loadOrMakeCA(dir, cn string) (*pki.CA, error) {
	certPEM, err1 := os.ReadFile(filepath.Join(dir, "ca.crt"))
	keyPEM, err2 := os.ReadFile(filepath.Join(dir, "ca.key"))
	if err := errors.Join(err1, err2); err == nil {
		return pki.LoadCA(certPEM, keyPEM)
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	ca, err := pki.NewCA(cn, rigCAValidity)
	if err != nil {
		return nil, err
	}
	keyPEM, err = ca.KeyPEM()
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, "ca.key"), keyPEM, 0o600); err != nil {
		return nil, err
	}
	return ca, os.WriteFile(filepath.Join(dir, "ca.crt"), ca.CertPEM, 0o644)
}

// issueAll writes each identity's directory that does not exist yet.
func issueAll(ca *pki.CA, dir string, ids map[string]pki.Request) error {
	for name, req := range ids {
		id := OVSDBTLS{Dir: filepath.Join(dir, name)}
		if _, err := os.Stat(id.Cert()); err == nil {
			continue
		}
		if err := writeIdentity(ca, id, req, ca.CertPEM); err != nil {
			return fmt.Errorf("issuing %s: %w", name, err)
		}
	}
	return nil
}

// writeIdentity issues req and writes the identity's key, certificate and trusted CAs (caPEM);
// each is written to a temporary name and renamed, certificate last, so a reader that finds a
// certificate finds its key.
func writeIdentity(ca *pki.CA, id OVSDBTLS, req pki.Request, caPEM []byte) error {
	if req.Validity == 0 {
		req.Validity = rigCertValidity
	}
	certPEM, keyPEM, err := ca.Issue(req)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(id.Dir, 0o700); err != nil {
		return err
	}
	for _, f := range []struct {
		path string
		data []byte
	}{{id.CA(), caPEM}, {id.Key(), keyPEM}, {id.Cert(), certPEM}} {
		if err := os.WriteFile(f.path+".tmp", f.data, 0o600); err != nil {
			return err
		}
		if err := os.Rename(f.path+".tmp", f.path); err != nil {
			return err
		}
	}
	return nil
}

// applyClustersetSecret creates or updates the InterConnect's TLS Secret (ictls.DefaultSecretName
// in KovnNamespace) from identity id, as an installer hands a cluster its clusterset certificate.
// An empty id (InsecurePlainTCP) applies nothing.
func applyClustersetSecret(ctx context.Context, kc kubernetes.Interface, id OVSDBTLS) error {
	return applyTLSSecret(ctx, kc, ictls.DefaultSecretName, id)
}

// applyTLSSecret creates or updates Secret name (kubernetes.io/tls with ca.crt, in
// KovnNamespace) from identity id; an empty id applies nothing.
func applyTLSSecret(ctx context.Context, kc kubernetes.Interface, name string, id OVSDBTLS) error {
	if id.Dir == "" {
		return nil
	}
	data := map[string][]byte{}
	for key, path := range map[string]string{ictls.KeyCert: id.Cert(), ictls.KeyKey: id.Key(), ictls.KeyCA: id.CA()} {
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		data[key] = b
	}
	want := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: KovnNamespace, Name: name},
		Type: corev1.SecretTypeTLS, Data: data}
	secrets := kc.CoreV1().Secrets(KovnNamespace)
	cur, err := secrets.Get(ctx, want.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		_, err = secrets.Create(ctx, want, metav1.CreateOptions{})
		return err
	}
	if err != nil {
		return err
	}
	cur.Data = data
	_, err = secrets.Update(ctx, cur, metav1.UpdateOptions{})
	return err
}
