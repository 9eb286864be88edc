package rig

import (
	"crypto/x509"
	"encoding/pem"
	"net/netip"
	"os"
	"path/filepath"
	"testing"

	"github.com/kovn/kovn/pkg/pki"
)

// TestRotateCA: after each step every identity trusts what the step says (the old CA, both,
// the next alone) and holds a certificate of the CA it should; the next CA becomes the CA.
func TestRotateCA(t *testing.T) {
	dir := t.TempDir()
	p := caPlan{dir: dir, cn: "test CA", ids: map[string]pki.Request{
		"server": {CommonName: "ovn-sb", IPs: []netip.Addr{netip.MustParseAddr("127.0.0.1")}, Usage: pki.Server | pki.Client},
		"c1-n1":  {CommonName: "c1-n1", Usage: pki.Client},
	}}
	ca, err := loadOrMakeCA(p.dir, p.cn)
	if err != nil {
		t.Fatal(err)
	}
	if err := issueAll(ca, p.dir, p.ids); err != nil {
		t.Fatal(err)
	}
	oldCA := parse(t, filepath.Join(dir, "ca.crt"))[0]
	check := func(step string, trusted []string, issuer string) {
		t.Helper()
		for name := range p.ids {
			id := OVSDBTLS{Dir: filepath.Join(dir, name)}
			var got []string
			for _, c := range parse(t, id.CA()) {
				got = append(got, c.Subject.CommonName)
			}
			if len(got) != len(trusted) || got[0] != trusted[0] || (len(got) > 1 && got[1] != trusted[1]) {
				t.Errorf("%s: %s trusts %v, want %v", step, name, got, trusted)
			}
			if leaf := parse(t, id.Cert())[0]; leaf.Issuer.CommonName != issuer {
				t.Errorf("%s: %s's certificate issued by %q, want %q", step, name, leaf.Issuer.CommonName, issuer)
			}
		}
	}
	check("before", []string{"test CA"}, "test CA")
	for _, step := range []RotationStep{TrustNextCA, IssueFromNextCA, RetireOldCA} {
		if err := rotateCA(p, step); err != nil {
			t.Fatal(err)
		}
		switch step {
		case TrustNextCA:
			check(step.String(), []string{"test CA", "test CA (next)"}, "test CA")
		case IssueFromNextCA:
			check(step.String(), []string{"test CA", "test CA (next)"}, "test CA (next)")
		case RetireOldCA:
			check(step.String(), []string{"test CA (next)"}, "test CA (next)")
		}
	}
	if cur := parse(t, filepath.Join(dir, "ca.crt"))[0]; cur.Subject.CommonName != "test CA (next)" || cur.Equal(oldCA) {
		t.Errorf("the CA after the rotation is %q", cur.Subject.CommonName)
	}
	if _, err := os.Stat(nextCADir(dir)); !os.IsNotExist(err) {
		t.Errorf("the next CA's directory is left: %v", err)
	}
}

func parse(t *testing.T, file string) []*x509.Certificate {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var out []*x509.Certificate
	for {
		var block *pem.Block
		if block, b = pem.Decode(b); block == nil {
			return out
		}
		c, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, c)
	}
}
