package kovnctl

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Lines as ovn-controller 23.03 wrote them in the rig (its container log's prefix removed).
const (
	allowLine  = `2026-11-27T05:13:10Z|00014|acl_log(ovn_pinctrl0)|INFO|name="acl/guard:ingress/0/ip4", verdict=allow, severity=notice, direction=to-lport: tcp,vlan_tci=0x0000,dl_src=0a:58:0a:10:00:05,dl_dst=0a:58:0a:10:00:06,nw_src=10.16.0.5,nw_dst=10.16.0.6,nw_tos=0,nw_ecn=0,nw_ttl=64,nw_frag=no,tp_src=34648,tp_dst=9000,tcp_flags=syn`
	denyLine6  = `2026-11-27T05:13:05Z|00009|acl_log(ovn_pinctrl0)|INFO|name="acl/guard:ingress/deny", verdict=drop, severity=alert, direction=to-lport: icmp6,vlan_tci=0x0000,dl_src=0a:58:0a:10:00:05,dl_dst=0a:58:0a:10:00:06,ipv6_src=fd00:10:16::5,ipv6_dst=fd00:10:16::6,ipv6_label=0x3c3a1,nw_tos=0,nw_ecn=0,nw_ttl=64,nw_frag=no,icmp_type=128,icmp_code=0`
	subnetLine = `2026-11-27T05:13:40Z|00030|acl_log(ovn_pinctrl0)|INFO|name="aclsub:acl/0", verdict=drop, severity=warning, direction=to-lport: udp,vlan_tci=0x0000,dl_src=0a:58:0a:d5:00:02,dl_dst=0a:58:0a:d5:00:03,nw_src=10.213.0.2,nw_dst=10.213.0.3,nw_tos=0,nw_ecn=0,nw_ttl=64,nw_frag=no,tp_src=40000,tp_dst=9001`
)

func TestParseACLLogLine(t *testing.T) {
	e, ok := ParseACLLogLine(allowLine)
	if !ok || e.Kind != "NetworkPolicy" || e.Namespace != "acl" || e.Name != "guard" || e.Rule != "ingress/0/ip4" ||
		e.Verdict != "allow" || e.Severity != "notice" || e.Direction != "to-lport" || e.Protocol != "tcp" || e.TCPFlags != "syn" ||
		e.Source != (ACLEndpoint{IP: "10.16.0.5", Port: 34648}) || e.Dest != (ACLEndpoint{IP: "10.16.0.6", Port: 9000}) ||
		e.Time != "2026-11-27T05:13:10Z" {
		t.Errorf("allow line: %+v", e)
	}
	e, ok = ParseACLLogLine(denyLine6)
	if !ok || e.Rule != "ingress/deny" || e.Verdict != "drop" || e.Protocol != "icmp6" || e.ICMP != "128/0" ||
		e.Source.IP != "fd00:10:16::5" || e.Dest.IP != "fd00:10:16::6" {
		t.Errorf("IPv6 deny line: %+v", e)
	}
	e, ok = ParseACLLogLine(subnetLine)
	if !ok || e.Kind != "Subnet" || e.Namespace != "" || e.Name != "aclsub" || e.Rule != "acl/0" || e.Dest.Port != 9001 {
		t.Errorf("Subnet line: %+v", e)
	}
	for _, l := range []string{
		`2026-11-27T05:13:10Z|00004|main|INFO|OVN internal version is : [23.03.1-20.27.0-70.6]`,
		`2026-11-27T05:13:10Z|00014|acl_log(ovn_pinctrl0)|INFO|verdict=allow`,
		`not a log line`,
	} {
		if _, ok := ParseACLLogLine(l); ok {
			t.Errorf("%q read as an ACL log line", l)
		}
	}
	e.Source.Pod, e.Dest.Pod = "aclsub/x", "aclsub/y"
	if got := FormatACLLogEntry(e); !strings.HasSuffix(got, "\n") || !strings.Contains(got, "Subnet aclsub acl/0") || !strings.Contains(got, "aclsub/x (10.213.0.2:40000) -> aclsub/y (10.213.0.3:9001)") {
		t.Errorf("formatted: %q", got)
	}
}

// A log file (OVN as a host service) is read line by line: other lines skipped, the node
// named, --since compared with each line's own time.
func TestReadACLLogFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ovn-controller.log")
	recent := strings.Replace(subnetLine, "2026-11-27T05:13:40Z", time.Now().UTC().Format(time.RFC3339), 1)
	old := strings.Replace(allowLine, "2026-11-27T05:13:10Z", "2020-01-01T00:00:00Z", 1)
	text := old + "\n2026-11-27T05:13:10Z|00004|main|INFO|hello\n" + recent + "\n"
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	read := func(since time.Duration) []ACLLogEntry {
		var got []ACLLogEntry
		err := readACLLogFile(context.Background(), path, "n1", ACLLogOptions{Since: since}, func(le ACLLogEntry) { got = append(got, le) })
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	if got := read(0); len(got) != 2 || got[0].Node != "n1" || got[0].Name != "guard" || got[1].Name != "aclsub" {
		t.Errorf("whole file: %+v", got)
	}
	if got := read(time.Hour); len(got) != 1 || got[0].Name != "aclsub" {
		t.Errorf("since an hour: %+v", got)
	}
}
