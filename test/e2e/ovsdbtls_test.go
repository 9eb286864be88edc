package e2e

import (
	"crypto/x509"
	"encoding/base64"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kovn/kovn/pkg/pki"
	"github.com/kovn/kovn/test/rig"
)

// otherCAIdentity issues a client certificate from a CA no database trusts, with cn (a node's
// chassis name, as a forger would pick).
func otherCAIdentity(t *testing.T, cn string) rig.OVSDBTLS {
	t.Helper()
	ca, err := pki.NewCA("not the rig's CA", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	certPEM, keyPEM, err := ca.Issue(pki.Request{CommonName: cn, Usage: pki.Client, Validity: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	f := rig.OVSDBTLS{Dir: t.TempDir()}
	for path, data := range map[string][]byte{f.Key(): keyPEM, f.Cert(): certPEM, f.CA(): ca.CertPEM} {
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return f
}

// ovsdbAs runs an OVS/OVN ctl tool from node ns's network namespace with identity id.
func ovsdbAs(ns string, id rig.OVSDBTLS, tool string, args ...string) (string, error) {
	argv := append(append([]string{"netns", "exec", ns, tool, "--timeout=5"}, id.Args()...), args...)
	out, err := exec.Command("ip", argv...).CombinedOutput()
	return strings.TrimSpace(string(out)), err
}

// ovsdbIdentity proves every OVN database the rig serves on the network takes mutual TLS and
// nothing else, from a node's network namespace in both families: a plain TCP client and a
// client with a certificate from another CA are refused by NB, SB, IC-NB and IC-SB (with
// OVN_ClusterSet); a node's own certificate opens SB but not NB (NB trusts another CA), and SB
// RBAC lets it write its own Chassis row only.
func ovsdbIdentity(t *testing.T, cfg rig.Config) {
	ns := cfg.NodeNS(1, 1)
	own, forged := cfg.ChassisTLS(1, 1), otherCAIdentity(t, rig.NodeName(1, 1))
	type server struct {
		what, tool string
		addr       netip.Addr
		port       int
		trusted    rig.OVSDBTLS // an identity the server accepts (nothing: no network client of it should)
	}
	var servers []server
	for _, a := range cfg.ControlPlaneIPs(1) {
		servers = append(servers, server{"NB", "ovn-nbctl", a, rig.PortNB, rig.OVSDBTLS{}}, server{"SB", "ovn-sbctl", a, rig.PortSB, own})
	}
	for _, a := range cfg.ICDBIPs() {
		azID := cfg.AZTLS(1)
		servers = append(servers, server{"IC-NB", "ovn-ic-nbctl", a, rig.PortICNB, azID}, server{"IC-SB", "ovn-ic-sbctl", a, rig.PortICSB, azID})
	}
	for _, s := range servers {
		hp := hostPort(s.addr.String(), s.port)
		if out, err := ovsdbAs(ns, rig.OVSDBTLS{}, "ovsdb-client", "list-dbs", "tcp:"+hp); err == nil {
			t.Errorf("%s at %s answered a plain TCP client: %s", s.what, hp, out)
		}
		if out, err := ovsdbAs(ns, forged, "ovsdb-client", "list-dbs", "ssl:"+hp); err == nil {
			t.Errorf("%s at %s answered a certificate from another CA: %s", s.what, hp, out)
		}
		if out, err := ovsdbAs(ns, own, "ovsdb-client", "list-dbs", "ssl:"+hp); s.what != "SB" && err == nil {
			t.Errorf("%s at %s answered node %s's chassis certificate: %s", s.what, hp, rig.NodeName(1, 1), out)
		}
		if s.trusted.Dir != "" {
			if out, err := ovsdbAs(ns, s.trusted, "ovsdb-client", "list-dbs", "ssl:"+hp); err != nil {
				t.Errorf("%s at %s refused the identity it trusts: %v: %s", s.what, hp, err, out)
			} else if s.what == "IC-SB" && !strings.Contains(out, "OVN_ClusterSet") {
				t.Errorf("IC-SB at %s serves %q, want OVN_ClusterSet beside it", hp, out)
			}
		}
	}
	t.Logf("NB, SB, IC-NB and IC-SB at %d addresses each refused a plain TCP client and another CA's certificate", len(cfg.ControlPlaneIPs(1)))

	// SB RBAC: node 1's certificate may write its own chassis, not node 2's.
	sb := "--db=ssl:" + hostPort(cfg.ControlPlaneIPs(1)[0].String(), rig.PortSB)
	victim := rig.NodeName(1, 2)
	out, err := ovsdbAs(ns, own, "ovn-sbctl", sb, "set", "Chassis", victim, "external_ids:kovn-e2e=forged")
	if err == nil || !strings.Contains(out, "RBAC rules for client") {
		t.Errorf("node %s's certificate set chassis %s's external_ids: err %v, %s; want an RBAC refusal", rig.NodeName(1, 1), victim, err, out)
	} else {
		t.Logf("SB RBAC refused node %s writing chassis %s: %s", rig.NodeName(1, 1), victim, lastLine(out))
	}
	if got, _ := ovsdbAs(ns, own, "ovn-sbctl", sb, "--bare", "get", "Chassis", victim, "external_ids:kovn-e2e"); strings.Contains(got, "forged") {
		t.Errorf("chassis %s carries the forged key", victim)
	}
	if out, err := ovsdbAs(ns, own, "ovn-sbctl", sb, "set", "Chassis", rig.NodeName(1, 1), "external_ids:kovn-e2e=own"); err != nil {
		t.Errorf("node %s's certificate could not write its own chassis (so the refusal above proves nothing): %v: %s", rig.NodeName(1, 1), err, out)
	}
	_, _ = ovsdbAs(ns, own, "ovn-sbctl", sb, "remove", "Chassis", rig.NodeName(1, 1), "external_ids", "kovn-e2e")
}

// brokenClustersetSecret: the InterConnect's TLS Secret with a key that is not its
// certificate's is reported (CredentialsReady=False naming the Secret, event SecretInvalid)
// while the AZ stays joined on the last good certificate; restored, it is Loaded again.
func brokenClustersetSecret(t *testing.T, c *cluster) {
	c.t = t
	credentials := func() (status, reason, msg string) {
		out, _ := c.kubectl("get", "interconnect", "default", "-o", `jsonpath={.status.conditions[?(@.type=="CredentialsReady")].status}|`+
			`{.status.conditions[?(@.type=="CredentialsReady")].reason}|{.status.conditions[?(@.type=="CredentialsReady")].message}`)
		parts := strings.SplitN(out, "|", 3)
		for len(parts) < 3 {
			parts = append(parts, "")
		}
		return parts[0], parts[1], parts[2]
	}
	// The Secret is read on a pass (at least once a minute), at most every ictls.RereadAfter;
	// an annotation makes a pass now, so the wait below makes one every 2 s.
	poke := func() {
		if out, err := c.kubectl("annotate", "interconnect", "default", "--overwrite", "kovn-e2e/poke="+time.Now().Format("150405.000")); err != nil {
			t.Fatalf("annotate InterConnect: %v %s", err, out)
		}
	}
	wait := func(want string, check func(status, reason, msg string) bool) string {
		t.Helper()
		var status, reason, msg string
		var poked time.Time
		if err := eventually(30*time.Second, func() error {
			if time.Since(poked) >= 2*time.Second {
				poke()
				poked = time.Now()
			}
			if status, reason, msg = credentials(); !check(status, reason, msg) {
				return fmt.Errorf("CredentialsReady %s %s %q, want %s", status, reason, msg, want)
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		return msg
	}
	wait("True Loaded", func(s, r, _ string) bool { return s == "True" && r == "Loaded" })
	goodKey, err := c.kubectl("get", "secret", "-n", "kube-system", "kovn-clusterset-tls", "-o", `jsonpath={.data.tls\.key}`)
	if err != nil || goodKey == "" {
		t.Fatalf("reading the clusterset Secret: %v %s", err, goodKey)
	}
	_, otherKey, err := mustCA(t).Issue(pki.Request{CommonName: "az1", Usage: pki.Client, Validity: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	patch := func(key string) {
		if out, err := c.kubectl("patch", "secret", "-n", "kube-system", "kovn-clusterset-tls", "--type=merge",
			"-p", fmt.Sprintf(`{"data":{"tls.key":%q}}`, key)); err != nil {
			t.Fatalf("patch Secret: %v %s", err, out)
		}
	}
	patch(base64.StdEncoding.EncodeToString(otherKey))
	msg := wait("False naming the Secret and keeping the last good certificate", func(s, r, m string) bool {
		return s == "False" && r == "SecretInvalid" && strings.Contains(m, "kube-system/kovn-clusterset-tls") &&
			strings.Contains(m, "the last good certificate stays in use")
	})
	t.Logf("CredentialsReady=False: %s", msg)
	if s := c.interConnectStatus(); s.ready != "True" {
		t.Errorf("InterConnect Ready %s (%s) with a broken Secret after a good one: want the AZ still joined", s.ready, s.message)
	}
	if ev, _ := c.kubectl("get", "events", "-A", "--field-selector", "reason=SecretInvalid", "-o", "name"); strings.TrimSpace(ev) == "" {
		t.Errorf("no SecretInvalid event")
	}
	patch(goodKey)
	wait("True Loaded again", func(s, r, _ string) bool { return s == "True" && r == "Loaded" })
}

func mustCA(t *testing.T) *pki.CA {
	t.Helper()
	ca, err := pki.NewCA("another CA", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	return ca
}

// tamperedRecord: cluster 2's AZ certificate (as a compromised cluster would) rewrites the
// holder and join time of c1's AZ in IC-NB, which OVN-IC's databases allow. c1's kovn puts
// both back within one resync, says so in Degraded (and an event), and stays joined.
func tamperedRecord(t *testing.T, c1 *cluster, cfg rig.Config) {
	get := func(path string) string {
		out, err := c1.kubectl("get", "interconnect", "default", "-o", "jsonpath="+path)
		if err != nil {
			t.Fatalf("kubectl get interconnect: %v %s", err, out)
		}
		return strings.TrimSpace(out)
	}
	az, joinedAt := get("{.status.azName}"), get("{.status.joinedAt}")
	uid, err := c1.kubectl("get", "namespace", "kube-system", "-o", "jsonpath={.metadata.uid}")
	if err != nil || az == "" || joinedAt == "" {
		t.Fatalf("c1's AZ %q joined at %q, kube-system %q: %v", az, joinedAt, uid, err)
	}
	ownerKey, joinedKey := `external_ids:"kovn.io/az-owner/`+az+`"`, `external_ids:"kovn.io/joined/`+az+`"`
	local := func(args ...string) string {
		out, err := exec.Command("ovn-ic-nbctl", append([]string{"--db=" + cfg.ICNBLocal(), "--timeout=10", "--no-leader-only"}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("ovn-ic-nbctl %v: %v %s", args, err, out)
		}
		return strings.Trim(strings.TrimSpace(string(out)), `"`)
	}
	row := local("--bare", "--columns=_uuid", "list", "IC_NB_Global")
	out, err := ovsdbAs(cfg.NodeNS(2, 1), cfg.AZTLS(2), "ovn-ic-nbctl",
		"--db="+cfg.ICNBEndpoint(), "set", "IC_NB_Global", row, ownerKey+`="evil"`, joinedKey+`="2099-01-01T00:00:00Z"`)
	if err != nil {
		t.Fatalf("az2's certificate writing az1's record (OVN-IC allows it): %v %s", err, out)
	}
	tampered := time.Now()
	var msg string
	if err := eventually(30*time.Second, func() error {
		st := get(`{.status.conditions[?(@.type=="Degraded")].status}`)
		msg = get(`{.status.conditions[?(@.type=="Degraded")].message}`)
		if st != "True" || !strings.Contains(msg, `the holder of AZ `+az+` was changed to "evil"`) || !strings.Contains(msg, "the join time of AZ "+az) {
			return fmt.Errorf("Degraded %s: %q", st, msg)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if got := local("get", "IC_NB_Global", row, ownerKey); got != strings.TrimSpace(uid) {
		t.Errorf("holder of %s after the repair: %q, want c1's %q", az, got, uid)
	}
	if got := local("get", "IC_NB_Global", row, joinedKey); got != joinedAt {
		t.Errorf("join time of %s after the repair: %q, want %q", az, got, joinedAt)
	}
	c1.waitReadyAfterRepair(t)
	if ev, _ := c1.kubectl("get", "events", "-A", "--field-selector", "reason=RecordTampered", "-o", "name"); strings.TrimSpace(ev) == "" {
		t.Errorf("c1: no RecordTampered event")
	}
	t.Logf("az2's certificate rewrote %s's holder and join time; c1 put both back and said so %.1fs later: %s", az, time.Since(tampered).Seconds(), msg)

	// The subnets the AZ declares (what its peers accept routes inside): widened to everything
	// by az2's certificate, they are put back and reported too.
	subnetsKey := `external_ids:"kovn.io/subnets/` + az + `"`
	declared := local("get", "IC_NB_Global", row, subnetsKey)
	if out, err := ovsdbAs(cfg.NodeNS(2, 1), cfg.AZTLS(2), "ovn-ic-nbctl", "--db="+cfg.ICNBEndpoint(), "set", "IC_NB_Global", row, subnetsKey+`="0.0.0.0/0"`); err != nil {
		t.Fatalf("az2's certificate writing az1's declared subnets: %v %s", err, out)
	}
	tampered = time.Now()
	if err := eventually(30*time.Second, func() error {
		msg = get(`{.status.conditions[?(@.type=="Degraded")].message}`)
		if !strings.Contains(msg, "the subnets AZ "+az+` declares were changed from "`+declared+`" to "0.0.0.0/0"`) {
			return fmt.Errorf("Degraded: %q", msg)
		}
		if got := local("get", "IC_NB_Global", row, subnetsKey); got != declared {
			return fmt.Errorf("declared subnets %q, want %q back", got, declared)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	t.Logf("az2's certificate widened %s's declared subnets %s to 0.0.0.0/0; put back and reported %.1fs later", az, declared, time.Since(tampered).Seconds())
}

// storeTampered: cluster 2's AZ certificate cannot delete c1's export of mcs/web from the
// clusterset store through the IC-SB relay. Deleted past the relay (on the databases' host),
// c1's kovn puts the row back within one resync and says so: a RecordTampered event on the
// ServiceExport and Degraded on its InterConnect naming the export.
func storeTampered(t *testing.T, c1 *cluster, cfg rig.Config) {
	rowsOfWeb := func() string {
		out, err := exec.Command("ovsdb-client", "--timeout=10", "query", cfg.ICSBLocal(),
			`["OVN_ClusterSet",{"op":"select","table":"Service_Export","where":[["cluster","==","az1"],["namespace","==","mcs"],["name","==","web"]],"columns":["name"]}]`).CombinedOutput()
		if err != nil {
			t.Fatalf("reading the store: %v %s", err, out)
		}
		return string(out)
	}
	if !strings.Contains(rowsOfWeb(), `"name":"web"`) {
		t.Fatalf("c1's export of mcs/web is not in the store: %s", rowsOfWeb())
	}
	// c1 calls a rewrite tampering only when its own last write is 2 s old or more (younger,
	// it may be its own write not yet in its cache): tamper once its rows stood still 3 s.
	az1Rows := func() string {
		out, _ := exec.Command("ovsdb-client", "--timeout=10", "query", cfg.ICSBLocal(),
			`["OVN_ClusterSet",{"op":"select","table":"Service_Export","where":[["cluster","==","az1"]]},`+
				`{"op":"select","table":"Endpoint_Slice","where":[["cluster","==","az1"]]}]`).CombinedOutput()
		return string(out)
	}
	last, since := az1Rows(), time.Now()
	if err := eventually(60*time.Second, func() error {
		if now := az1Rows(); now != last {
			last, since = now, time.Now()
		}
		if time.Since(since) < 3*time.Second {
			return fmt.Errorf("c1's rows changed %s ago", time.Since(since).Round(time.Millisecond))
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	deleteWeb := `["OVN_ClusterSet",{"op":"delete","table":"Service_Export","where":[["cluster","==","az1"],["namespace","==","mcs"],["name","==","web"]]}]`
	// Through the IC-SB relay, az2's certificate deletes nothing of c1's: the delete is bound
	// to az2's own clusters, and az2 has no cluster whose export matches.
	out, err := ovsdbAs(cfg.NodeNS(2, 1), cfg.AZTLS(2), "ovsdb-client", "transact", cfg.ICSBEndpoint(), deleteWeb)
	if err == nil && strings.Contains(out, `"count":1`) || !strings.Contains(rowsOfWeb(), `"name":"web"`) {
		t.Fatalf("az2's certificate deleted az1's export through the IC-SB relay: %v %s", err, out)
	}
	t.Logf("az2's certificate deleting c1's export through the relay: %s", out)
	// Past the relay (on the databases' host: a deployment without it, or a compromised
	// host), the delete happens; c1 puts the row back.
	local, err := exec.Command("ovsdb-client", "--timeout=10", "transact", cfg.ICSBLocal(), deleteWeb).CombinedOutput()
	if err != nil || !strings.Contains(string(local), `"count":1`) {
		t.Fatalf("deleting az1's export on the IC-SB host: %v %s", err, local)
	}
	tampered := time.Now()
	var msg string
	if err := eventually(30*time.Second, func() error {
		if !strings.Contains(rowsOfWeb(), `"name":"web"`) {
			return fmt.Errorf("the row is not back")
		}
		st, _ := c1.kubectl("get", "interconnect", "default", "-o", `jsonpath={.status.conditions[?(@.type=="Degraded")].status}`)
		msg, _ = c1.kubectl("get", "interconnect", "default", "-o", `jsonpath={.status.conditions[?(@.type=="Degraded")].message}`)
		if strings.TrimSpace(st) != "True" || !strings.Contains(msg, "export of mcs/web") {
			return fmt.Errorf("Degraded %s: %q", st, msg)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	took := time.Since(tampered)
	ev, _ := c1.kubectl("get", "events", "-n", "mcs", "--field-selector", "reason=RecordTampered,involvedObject.kind=ServiceExport", "-o", "name")
	if strings.TrimSpace(ev) == "" {
		t.Error("c1: no RecordTampered event on the ServiceExport")
	}
	t.Logf("c1's export of mcs/web deleted on the IC-SB host; c1 put it back and said so %.1fs later: %s", took.Seconds(), msg)
}

// chartIdentity: the chart's OVN central takes mutual TLS only, each node's ovn-controller
// presents a chassis certificate its kovn-daemon got through a CSR (CN = the node, issued by
// the chassis CA in kovn-ovn-chassis-ca), and SB's RBAC holds that certificate to its own
// chassis while NB refuses it.
func chartIdentity(t *testing.T, c *cluster, cfg rig.Config) {
	c.t = t
	chassisCA := caOf(t, c, "kovn-ovn-chassis-ca")
	ids := map[string]rig.OVSDBTLS{}
	for n := 1; n <= cfg.Nodes; n++ {
		node := rig.NodeName(1, n)
		var id rig.OVSDBTLS
		if err := eventually(60*time.Second, func() error {
			var err error
			id, err = chassisIdentity(cfg, n, chassisCA)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		ids[node] = id
	}
	ns, own, forged := cfg.NodeNS(1, 1), ids[rig.NodeName(1, 1)], otherCAIdentity(t, rig.NodeName(1, 1))
	central := cfg.NodeIPs(1, 1)[0].String()
	for _, s := range []struct {
		what string
		port int
	}{{"NB", rig.PortNB}, {"SB", rig.PortSB}} {
		hp := hostPort(central, s.port)
		if out, err := ovsdbAs(ns, rig.OVSDBTLS{}, "ovsdb-client", "list-dbs", "tcp:"+hp); err == nil {
			t.Errorf("%s at %s answered a plain TCP client: %s", s.what, hp, out)
		}
		if out, err := ovsdbAs(ns, forged, "ovsdb-client", "list-dbs", "ssl:"+hp); err == nil {
			t.Errorf("%s at %s answered a certificate from another CA: %s", s.what, hp, out)
		}
		out, err := ovsdbAs(ns, own, "ovsdb-client", "list-dbs", "ssl:"+hp)
		if s.what == "NB" && err == nil {
			t.Errorf("NB at %s answered node %s's chassis certificate: %s", hp, rig.NodeName(1, 1), out)
		}
		if s.what == "SB" && err != nil {
			t.Errorf("SB at %s refused node %s's chassis certificate: %v %s", hp, rig.NodeName(1, 1), err, out)
		}
	}
	sb := "--db=ssl:" + hostPort(central, rig.PortSB)
	victim := rig.NodeName(1, 2)
	out, err := ovsdbAs(ns, own, "ovn-sbctl", sb, "set", "Chassis", victim, "external_ids:kovn-e2e=forged")
	if err == nil || !strings.Contains(out, "RBAC rules for client") {
		t.Errorf("node %s's certificate set chassis %s's external_ids: err %v, %s; want an RBAC refusal", rig.NodeName(1, 1), victim, err, out)
	}
	if out, err := ovsdbAs(ns, own, "ovn-sbctl", sb, "set", "Chassis", rig.NodeName(1, 1), "external_ids:kovn-e2e=own"); err != nil {
		t.Errorf("node %s's certificate could not write its own chassis (so the refusal above proves nothing): %v: %s", rig.NodeName(1, 1), err, out)
	}
	_, _ = ovsdbAs(ns, own, "ovn-sbctl", sb, "remove", "Chassis", rig.NodeName(1, 1), "external_ids", "kovn-e2e")
	if t.Failed() {
		return
	}
	t.Logf("chart: NB and SB at %s refused plain TCP and another CA; each node's CSR-issued chassis certificate opens SB only, and SB RBAC kept %s off %s's chassis",
		central, rig.NodeName(1, 1), victim)
}

// chassisIdentity is the certificate node n of cluster 1's SSL row points ovn-controller at
// (kovn-daemon's, from a CSR), as a directory on the host; an error unless it is the node's
// (CN) and issued by ca.
func chassisIdentity(cfg rig.Config, n int, ca *x509.Certificate) (rig.OVSDBTLS, error) {
	node := rig.NodeName(1, n)
	db := "--db=unix:" + filepath.Join(cfg.NodeDir(1, n), "host", "ovs-run", "db.sock")
	out, err := exec.Command("ovs-vsctl", db, "--timeout=5", "get-ssl").CombinedOutput()
	var cert string
	for _, line := range strings.Split(string(out), "\n") {
		if p, ok := strings.CutPrefix(line, "Certificate: "); ok {
			cert = strings.TrimSpace(p)
		}
	}
	if err != nil || cert == "" {
		return rig.OVSDBTLS{}, fmt.Errorf("%s's SSL row: %v %s", node, err, out)
	}
	// As the pods see it (/var/run/ovn/...), on the host: the node's own ovn-run directory.
	id := rig.OVSDBTLS{Dir: filepath.Join(cfg.NodeDir(1, n), "host", "ovn-run", strings.TrimPrefix(filepath.Dir(cert), "/var/run/ovn/"))}
	b, err := os.ReadFile(id.Cert())
	if err != nil {
		return id, err
	}
	leaf, err := pki.ParseCertificate(b)
	if err != nil {
		return id, err
	}
	if leaf.Subject.CommonName != node || leaf.CheckSignatureFrom(ca) != nil {
		return id, fmt.Errorf("%s's chassis certificate: CN %q, from %s: %v", node, leaf.Subject.CommonName, ca.Subject.CommonName, leaf.CheckSignatureFrom(ca))
	}
	return id, nil
}
