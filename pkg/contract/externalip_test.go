package contract

import (
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func svcAt(ns, name string, age time.Duration, clusterIP string, external ...string) corev1.Service {
	return corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name,
		CreationTimestamp: metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).Add(-age))},
		Spec: corev1.ServiceSpec{ClusterIPs: []string{clusterIP}, ExternalIPs: external}}
}

// Only the admin's ranges; never the cluster's own ranges, a node, a ClusterIP (kube-dns's
// included) or an address another Service claimed first; nothing at all without ranges.
func TestExternalIPRules(t *testing.T) {
	rules := ExternalIPRules{
		Allowed:   []netip.Prefix{netip.MustParsePrefix("198.51.100.0/24"), netip.MustParsePrefix("10.0.0.0/8")},
		Reserved:  []netip.Prefix{netip.MustParsePrefix("10.16.0.0/16"), netip.MustParsePrefix("10.96.0.0/12")},
		NodeAddrs: []netip.Addr{netip.MustParseAddr("10.0.0.11")},
	}
	dns := svcAt("kube-system", "kube-dns", time.Hour, "10.96.0.10")
	first := svcAt("a", "first", time.Hour, "10.96.1.1", "198.51.100.7")
	thief := svcAt("t1", "thief", time.Minute, "10.96.1.2",
		"198.51.100.7", // first's
		"198.51.100.8", // free
		"10.96.0.10",   // kube-dns's ClusterIP (reserved: the Service CIDR)
		"10.0.0.11",    // a node
		"10.16.0.5",    // a pod's
		"192.0.2.1",    // outside the allowed ranges
		"not-an-ip")
	all := []corev1.Service{dns, thief, first}
	kept, refused := rules.ExternalIPs(&thief, rules.Claims(all))
	if want := []netip.Addr{netip.MustParseAddr("198.51.100.8")}; !slices.Equal(kept, want) {
		t.Errorf("thief keeps %v, want %v", kept, want)
	}
	for _, want := range []string{"198.51.100.7 refused: Service a/first claimed it first", "10.96.0.10 refused: it is inside the cluster's own",
		"10.0.0.11 refused: it is a node's address", "10.16.0.5 refused", "192.0.2.1 refused: it is outside the allowed ranges", `"not-an-ip" is not an address`} {
		if !slices.ContainsFunc(refused, func(r string) bool { return strings.Contains(r, want) }) {
			t.Errorf("no refusal %q in %q", want, refused)
		}
	}
	if kept, _ := rules.ExternalIPs(&first, rules.Claims(all)); len(kept) != 1 {
		t.Errorf("the first claimant keeps %v", kept)
	}
	// A ClusterIP outside the reserved ranges (a second Service CIDR kovn was not told of).
	rules.Reserved = nil
	if kept, refused := rules.ExternalIPs(&thief, rules.Claims(all)); slices.Contains(kept, netip.MustParseAddr("10.96.0.10")) ||
		!slices.ContainsFunc(refused, func(r string) bool { return strings.Contains(r, "ClusterIP of Service kube-system/kube-dns") }) {
		t.Errorf("kube-dns's ClusterIP: kept %v, refused %q", kept, refused)
	}
	// The first claimant gone, the address goes to the next.
	if kept, _ := rules.ExternalIPs(&thief, rules.Claims([]corev1.Service{dns, thief})); !slices.Contains(kept, netip.MustParseAddr("198.51.100.7")) {
		t.Errorf("after first is gone thief keeps %v", kept)
	}
	// No ranges: nothing.
	if kept, refused := (ExternalIPRules{}).ExternalIPs(&first, ExternalIPRules{}.Claims(all)); len(kept) != 0 ||
		len(refused) != 1 || !strings.Contains(refused[0], "no external IP range is allowed") {
		t.Errorf("no ranges: kept %v, refused %q", kept, refused)
	}
}
