package cluster

import (
	"strings"
	"testing"

	kovnv1 "github.com/kovn/kovn/api/v1alpha1"
	"github.com/kovn/kovn/pkg/cluster/topology"
)

func TestParseBandwidth(t *testing.T) {
	for in, want := range map[string]int{"50M": 50000, "1G": 1000000, "20M": 20000, "1k": 1, "1500k": 1500, "2.5M": 2500, "4294967295k": 4294967295} {
		if got, err := kovnv1.ParseBandwidth(in); err != nil || got != want {
			t.Errorf("ParseBandwidth(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "fast", "0", "-5M", "999", "10P", "4294967296k", "50 M", "50Mbps"} {
		if got, err := kovnv1.ParseBandwidth(in); err == nil {
			t.Errorf("ParseBandwidth(%q) = %d, want an error", in, got)
		}
	}
}

func TestPodBandwidth(t *testing.T) {
	none := topology.Bandwidth{}
	subnet := topology.Bandwidth{IngressKbps: 50000}
	current := topology.Bandwidth{IngressKbps: 20000, EgressKbps: 100000}
	for _, tc := range []struct {
		name        string
		annotations map[string]string
		subnet      topology.Bandwidth
		want        topology.Bandwidth
		problems    []string // substrings, one per problem
	}{
		{"no annotation, no default: unlimited", nil, none, none, nil},
		{"both annotations", map[string]string{"kubernetes.io/ingress-bandwidth": "20M", "kubernetes.io/egress-bandwidth": "100M"},
			none, topology.Bandwidth{IngressKbps: 20000, EgressKbps: 100000}, nil},
		{"the Subnet's default", nil, subnet, topology.Bandwidth{IngressKbps: 50000}, nil},
		{"an annotation lowers the default", map[string]string{"kubernetes.io/ingress-bandwidth": "10M"}, subnet,
			topology.Bandwidth{IngressKbps: 10000}, nil},
		{"an annotation cannot raise it", map[string]string{"kubernetes.io/ingress-bandwidth": "1G"}, subnet,
			topology.Bandwidth{IngressKbps: 50000}, []string{"above the Subnet's limit; the Subnet's 50M applies"}},
		{"malformed: what is programmed stays", map[string]string{"kubernetes.io/egress-bandwidth": "fast", "kubernetes.io/ingress-bandwidth": "20M"},
			none, topology.Bandwidth{IngressKbps: 20000, EgressKbps: 100000}, []string{`"fast" is not a bandwidth`}},
		{"out of range: what is programmed stays", map[string]string{"kubernetes.io/ingress-bandwidth": "0", "kubernetes.io/egress-bandwidth": "10P"},
			none, current, []string{"below the smallest limit, 1k (1000 bit/s); the limit stays 20M", "above the largest limit"}},
	} {
		reads := 0
		got, problems := podBandwidth(tc.annotations, tc.subnet, func() topology.Bandwidth { reads++; return current })
		if reads > 0 && len(tc.problems) == 0 {
			t.Errorf("%s: read what is programmed %d times with no annotation refused", tc.name, reads)
		}
		if got != tc.want {
			t.Errorf("%s: %+v, want %+v", tc.name, got, tc.want)
		}
		if len(problems) != len(tc.problems) {
			t.Errorf("%s: problems %q, want %d", tc.name, problems, len(tc.problems))
			continue
		}
		for i, p := range tc.problems {
			if !strings.Contains(problems[i], p) {
				t.Errorf("%s: problem %q, want it to say %q", tc.name, problems[i], p)
			}
		}
	}
}
