package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/kovn/kovn/pkg/pki"
	"github.com/kovn/kovn/test/rig"
)

// rotationCount bounds the stream across a rotation (100 ms probes): its three steps, two
// restarts of each ovn-ic and every client's reconnection take well under a minute.
const rotationCount = 900

// rotatedEverything replaces every CA of the rig's OVN PKI and every certificate (servers NB,
// SB, IC-NB, IC-SB with OVN_ClusterSet; each node's ovn-controller; each AZ's ovn-ic and
// kovn-controller) under a 100 ms cross-cluster probe stream, in the three steps of
// rig.RotateOVNPKI, and proves that no probe is lost, that every client is connected again
// with its new identity after the servers dropped every session, and that the old CA's
// certificates open nothing.
func rotatedEverything(t *testing.T, a, b *cluster, st *rig.State, pb *corev1.Pod) {
	cfg := st.Config
	ctx := context.Background()
	// Old identities, kept to show at the end that the servers no longer take them.
	oldAZ, oldChassis := keepIdentity(t, cfg.AZTLS(2)), keepIdentity(t, cfg.ChassisTLS(1, 1))
	var took []string
	var settled time.Duration
	sent, lost, outage := a.measureUntil(t, "default", "a", pb.Status.PodIPs[0].IP, rotationCount, 100*time.Millisecond, func() {
		for _, step := range []rig.RotationStep{rig.TrustNextCA, rig.IssueFromNextCA, rig.RetireOldCA} {
			start := time.Now()
			if err := st.RotateOVNPKI(ctx, step); err != nil {
				t.Fatal(err)
			}
			took = append(took, fmt.Sprintf("%s %.1fs", step, time.Since(start).Seconds()))
		}
	}, func() {
		start := time.Now()
		everyClientBack(t, cfg, []*cluster{a, b})
		settled = time.Since(start)
	})
	if lost != 0 {
		t.Errorf("probes c1 -> c2 across the rotation: %d of %d lost (longest outage %s), want none", lost, sent, outage)
	}
	t.Logf("rotated (%s); every client back on its new identity %.1fs after the sessions were dropped; %d of %d probes lost",
		strings.Join(took, ", "), settled.Seconds(), lost, sent)

	// The old CA's certificates are refused by the servers (the client trusts the new CA, so
	// only the server can be refusing), the new ones taken.
	sb := "ssl:" + hostPort(cfg.ControlPlaneIPs(1)[0].String(), rig.PortSB)
	for _, c := range []struct {
		what, ns, endpoint string
		old, cur           rig.OVSDBTLS
	}{
		{"IC-SB", cfg.NodeNS(2, 1), cfg.ICSBEndpoints()[0], oldAZ, cfg.AZTLS(2)},
		{"SB", cfg.NodeNS(1, 1), sb, oldChassis, cfg.ChassisTLS(1, 1)},
	} {
		copyFile(t, c.cur.CA(), c.old.CA())
		if out, err := ovsdbAs(c.ns, c.old, "ovsdb-client", "list-dbs", c.endpoint); err == nil {
			t.Errorf("%s took a certificate of the retired CA: %s", c.what, out)
		}
		if out, err := ovsdbAs(c.ns, c.cur, "ovsdb-client", "list-dbs", c.endpoint); err != nil {
			t.Errorf("%s refused the new certificate: %v %s", c.what, err, out)
		}
	}
}

// everyClientBack waits until every client of the rig's databases works again after they
// dropped every session: each cluster's ovn-controllers have processed a new NB change
// (ovn-nbctl --wait=hv: each wrote its Chassis_Private over SB, which takes its chassis
// certificate), each ovn-ic made a new transit switch in its AZ (it reads IC-NB and writes
// IC-SB), and each kovn-controller reconciled a spec change (its pass reads IC-NB from the
// server) holding the new certificate.
func everyClientBack(t *testing.T, cfg rig.Config, clusters []*cluster) {
	t.Helper()
	for i, c := range clusters {
		if err := eventually(60*time.Second, func() error {
			out, err := exec.Command("ovn-nbctl", "--db="+c.info.NBAddr, "--timeout=5", "--wait=hv", "sync").CombinedOutput()
			if err != nil {
				return fmt.Errorf("%s: ovn-nbctl --wait=hv sync: %v %s", c.info.Name, err, out)
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if out, err := c.kubectl("patch", "interconnect", "default", "--type=merge", "-p",
			fmt.Sprintf(`{"spec":{"bfd":{"multiplier":%d}}}`, 6+i)); err != nil {
			t.Fatalf("patch %s's InterConnect: %v %s", c.info.Name, err, out)
		}
	}
	const probe = "kovn-rotation-probe"
	icnb := func(args ...string) error {
		out, err := exec.Command("ovn-ic-nbctl", append([]string{"--db=" + cfg.ICNBLocal(), "--timeout=10"}, args...)...).CombinedOutput()
		if err != nil {
			return fmt.Errorf("ovn-ic-nbctl %v: %v %s", args, err, out)
		}
		return nil
	}
	if err := icnb("--may-exist", "ts-add", probe); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := icnb("--if-exists", "ts-del", probe); err != nil {
			t.Error(err)
		}
	}()
	for i, c := range clusters {
		serial := certSerial(t, cfg.AZTLS(i+1).Cert())
		if err := eventually(70*time.Second, func() error {
			out, _ := exec.Command("ovn-nbctl", "--db="+c.info.NBAddr, "--timeout=5", "--bare", "--columns=name", "find", "Logical_Switch", "name="+probe).CombinedOutput()
			if strings.TrimSpace(string(out)) != probe {
				return fmt.Errorf("%s's ovn-ic has not made transit switch %s in its NB", c.info.Name, probe)
			}
			st, _ := c.kubectl("get", "interconnect", "default", "-o",
				`jsonpath={.metadata.generation}|{.status.conditions[?(@.type=="Ready")].observedGeneration}|`+
					`{.status.conditions[?(@.type=="Ready")].status}|{.status.conditions[?(@.type=="CredentialsReady")].message}`)
			f := strings.SplitN(st, "|", 4)
			if len(f) < 4 || f[0] != f[1] || f[2] != "True" || !strings.Contains(f[3], "serial "+serial+",") {
				return fmt.Errorf("%s's InterConnect (generation|Ready's observed generation|Ready|credentials) %q, want Ready for its generation on the certificate with serial %s", c.info.Name, st, serial)
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
}

// keepIdentity copies an identity's certificate and key aside.
func keepIdentity(t *testing.T, id rig.OVSDBTLS) rig.OVSDBTLS {
	t.Helper()
	kept := rig.OVSDBTLS{Dir: t.TempDir()}
	copyFile(t, id.Cert(), kept.Cert())
	copyFile(t, id.Key(), kept.Key())
	copyFile(t, id.CA(), kept.CA())
	return kept
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Clean(to), b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// certSerial is the serial number (hex) of the PEM certificate in file.
func certSerial(t *testing.T, file string) string {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := pki.ParseCertificate(b)
	if err != nil {
		t.Fatal(err)
	}
	return cert.SerialNumber.Text(16)
}
