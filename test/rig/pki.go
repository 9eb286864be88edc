package rig

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// clusterPKI is the per-cluster credential set: a CA, the apiserver serving cert, the service
// account key pair and static bearer tokens (admin and one per node).
type clusterPKI struct {
	Dir        string
	AdminToken string
	NodeTokens map[string]string
}

func (p clusterPKI) path(name string) string { return filepath.Join(p.Dir, name) }

func randomToken() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func writePEM(path, typ string, der []byte) error {
	return os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600)
}

// newClusterPKI writes ca.crt, apiserver.{crt,key}, sa.{pub,key} and tokens.csv into dir.
func newClusterPKI(dir string, ips []net.IP, nodes []string) (clusterPKI, error) {
	p := clusterPKI{Dir: dir, AdminToken: randomToken(), NodeTokens: map[string]string{}}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return p, err
	}
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	now := time.Now().Add(-time.Hour)
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "kovn-rig-ca"},
		NotBefore: now, NotAfter: now.Add(10 * 365 * 24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return p, err
	}
	ca, _ := x509.ParseCertificate(caDER)
	srvKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	srvTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "kube-apiserver"},
		NotBefore: now, NotAfter: now.Add(10 * 365 * 24 * time.Hour),
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses: ips,
		DNSNames:    []string{"kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local", "localhost"},
	}
	srvDER, err := x509.CreateCertificate(rand.Reader, srvTmpl, ca, &srvKey.PublicKey, caKey)
	if err != nil {
		return p, err
	}
	saKey, _ := rsa.GenerateKey(rand.Reader, 2048)
	srvKeyDER, _ := x509.MarshalECPrivateKey(srvKey)
	saPubDER, _ := x509.MarshalPKIXPublicKey(&saKey.PublicKey)
	for _, w := range []struct {
		name, typ string
		der       []byte
	}{
		{"ca.crt", "CERTIFICATE", caDER},
		{"apiserver.crt", "CERTIFICATE", srvDER},
		{"apiserver.key", "EC PRIVATE KEY", srvKeyDER},
		{"sa.key", "RSA PRIVATE KEY", x509.MarshalPKCS1PrivateKey(saKey)},
		{"sa.pub", "PUBLIC KEY", saPubDER},
	} {
		if err := writePEM(p.path(w.name), w.typ, w.der); err != nil {
			return p, err
		}
	}
	lines := []string{p.AdminToken + ",admin,admin,system:masters"}
	for i, n := range nodes {
		p.NodeTokens[n] = randomToken()
		lines = append(lines, fmt.Sprintf("%s,system:node:%s,node-%d,system:nodes", p.NodeTokens[n], n, i))
	}
	return p, os.WriteFile(p.path("tokens.csv"), []byte(strings.Join(lines, "\n")+"\n"), 0o600)
}

// writeKubeconfig writes a token kubeconfig for server.
func (p clusterPKI) writeKubeconfig(path, cluster, server, user, token string) error {
	kc := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: %[1]s
  cluster:
    server: %[2]s
    certificate-authority: %[3]s
users:
- name: %[4]s
  user:
    token: %[5]s
contexts:
- name: %[1]s
  context: {cluster: %[1]s, user: %[4]s}
current-context: %[1]s
`, cluster, server, p.path("ca.crt"), user, token)
	return os.WriteFile(path, []byte(kc), 0o600)
}
