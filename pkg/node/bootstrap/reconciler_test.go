package bootstrap

import (
	"net/netip"
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kovn/kovn/pkg/annotation"
)

func TestJoinConfig(t *testing.T) {
	v4 := map[string]string{
		annotation.JoinIP: "100.64.0.2", annotation.JoinMAC: "0a:58:64:40:00:02",
		annotation.JoinCIDR: "100.64.0.0/16", annotation.JoinGateway: "100.64.0.1",
	}
	with := func(k, v string) map[string]string {
		m := map[string]string{}
		for kk, vv := range v4 {
			m[kk] = vv
		}
		if v == "" {
			delete(m, k)
		} else {
			m[k] = v
		}
		return m
	}
	tests := []struct {
		desc    string
		ann     map[string]string
		want    JoinConfig
		wantOK  bool
		wantErr string
	}{
		{desc: "IPv4", ann: v4, wantOK: true, want: JoinConfig{
			IPs: []netip.Prefix{netip.MustParsePrefix("100.64.0.2/16")}, Gateways: []netip.Addr{netip.MustParseAddr("100.64.0.1")},
			MAC: "0a:58:64:40:00:02", IfaceID: "node-worker-1", MTU: 1400}},
		{desc: "dual stack", wantOK: true, ann: map[string]string{
			annotation.JoinIP: "100.64.0.2,fd00:100:64::2", annotation.JoinMAC: "0a:58:64:40:00:02",
			annotation.JoinCIDR: "100.64.0.0/16,fd00:100:64::/112", annotation.JoinGateway: "100.64.0.1,fd00:100:64::1"},
			want: JoinConfig{
				IPs:      []netip.Prefix{netip.MustParsePrefix("100.64.0.2/16"), netip.MustParsePrefix("fd00:100:64::2/112")},
				Gateways: []netip.Addr{netip.MustParseAddr("100.64.0.1"), netip.MustParseAddr("fd00:100:64::1")},
				MAC:      "0a:58:64:40:00:02", IfaceID: "node-worker-1", MTU: 1400}},
		{desc: "IPv6 only", wantOK: true, ann: map[string]string{
			annotation.JoinIP: "fd00:100:64::2", annotation.JoinMAC: "0a:58:64:40:00:02",
			annotation.JoinCIDR: "fd00:100:64::/112", annotation.JoinGateway: "fd00:100:64::1"},
			want: JoinConfig{
				IPs:      []netip.Prefix{netip.MustParsePrefix("fd00:100:64::2/112")},
				Gateways: []netip.Addr{netip.MustParseAddr("fd00:100:64::1")},
				MAC:      "0a:58:64:40:00:02", IfaceID: "node-worker-1", MTU: 1400}},
		{desc: "no annotations", ann: nil},
		{desc: "no join IP", ann: with(annotation.JoinIP, "")},
		{desc: "no join MAC", ann: with(annotation.JoinMAC, "")},
		{desc: "no join CIDR", ann: with(annotation.JoinCIDR, "")},
		{desc: "no join gateway", ann: with(annotation.JoinGateway, "")},
		{desc: "bad join IP", ann: with(annotation.JoinIP, "100.64.0.300"), wantErr: annotation.JoinIP},
		{desc: "bad join CIDR", ann: with(annotation.JoinCIDR, "100.64.0.0"), wantErr: annotation.JoinCIDR},
		{desc: "more CIDRs than IPs", ann: with(annotation.JoinCIDR, "100.64.0.0/16,fd00::/64"), wantErr: annotation.JoinCIDR},
		{desc: "bad join gateway", ann: with(annotation.JoinGateway, "gw"), wantErr: annotation.JoinGateway},
		{desc: "bad join MAC", ann: with(annotation.JoinMAC, "zz"), wantErr: annotation.JoinMAC},
		{desc: "CIDR of the other family", wantErr: "families", ann: map[string]string{
			annotation.JoinIP: "100.64.0.2,fd00:100:64::2", annotation.JoinMAC: "0a:58:64:40:00:02",
			annotation.JoinCIDR: "fd00:100:64::/112,100.64.0.0/16", annotation.JoinGateway: "100.64.0.1,fd00:100:64::1"}},
		{desc: "fewer gateways than IPs", wantErr: annotation.JoinGateway, ann: map[string]string{
			annotation.JoinIP: "100.64.0.2,fd00:100:64::2", annotation.JoinMAC: "0a:58:64:40:00:02",
			annotation.JoinCIDR: "100.64.0.0/16,fd00:100:64::/112", annotation.JoinGateway: "100.64.0.1"}},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "worker-1", Annotations: tc.ann}}
			got, ok, err := joinConfig(n, 1400)
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("error = %v, want one mentioning %q", err, tc.wantErr)
			}
			if ok != tc.wantOK {
				t.Errorf("ok = %v, want %v", ok, tc.wantOK)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("joinConfig = %+v, want %+v", got, tc.want)
			}
		})
	}
}
