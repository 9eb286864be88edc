package mcs

import (
	"fmt"
	"slices"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	mcsv1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
)

// portsBySource are the ports each source cluster's imported slices carry, as "name/port".
func portsBySource(im Import, store []Slice, local string) map[string][]string {
	got := map[string][]string{}
	for _, es := range ImportedSlices(im, store, local) {
		src := es.Labels[mcsv1.LabelSourceCluster]
		for _, p := range es.Ports {
			got[src] = append(got[src], fmt.Sprintf("%s/%d", *p.Name, *p.Port))
		}
	}
	return got
}

func TestImportedSlicesLocality(t *testing.T) {
	http := Port{Name: "http", Protocol: "TCP", Port: 80}
	target := []Port{{Name: "http", Protocol: "TCP", Port: 8080}}
	slice := func(cluster string, ready bool) Slice {
		return Slice{Cluster: cluster, Name: "web-1", AddressType: "IPv4", Ports: target,
			Endpoints: []Endpoint{{Addresses: []string{"10.0.0.1"}, Ready: ready, Serving: ready}}}
	}
	both := []string{"http/8080"}
	for _, c := range []struct {
		name           string
		locality       string
		c1Ready        bool
		local          string
		wantC1, wantC2 []string
	}{
		{"global: every cluster", "", true, "c1", both, both},
		{"local-first in c1 with a ready endpoint: c1 alone", LocalityLocalFirst, true, "c1", both, nil},
		{"local-first in c1 without a ready endpoint: c2", LocalityLocalFirst, false, "c1", both, both},
		{"local-first in c2: c2 alone", LocalityLocalFirst, true, "c2", nil, both},
		{"local-first in c3, which exports nothing: every cluster", LocalityLocalFirst, true, "c3", both, both},
		{"remote-only in c1: c2 alone", LocalityRemoteOnly, true, "c1", nil, both},
		{"remote-only in c3: every cluster", LocalityRemoteOnly, true, "c3", both, both},
	} {
		t.Run(c.name, func(t *testing.T) {
			e1, e2 := export("c1", 2, http), export("c2", 1, http)
			e1.Locality, e2.Locality = c.locality, c.locality
			im := Merge([]Export{e1, e2})
			if len(im.Conflicts) != 0 || im.Locality != c.locality {
				t.Fatalf("conflicts %v, locality %q", im.Conflicts, im.Locality)
			}
			got := portsBySource(im, []Slice{slice("c1", c.c1Ready), slice("c2", true)}, c.local)
			if !slices.Equal(got["c1"], c.wantC1) || !slices.Equal(got["c2"], c.wantC2) {
				t.Fatalf("ports of c1's slice %v, c2's %v; want %v and %v", got["c1"], got["c2"], c.wantC1, c.wantC2)
			}
		})
	}
}

func TestLocalityConflictAndValues(t *testing.T) {
	http := Port{Name: "http", Protocol: "TCP", Port: 80}
	e1, e2 := export("c1", 2, http), export("c2", 1, http)
	e2.Locality = LocalityLocalFirst
	im := Merge([]Export{e1, e2})
	if im.Locality != "" || !slices.Contains(im.Conflicts, ReasonLocalityConflict) {
		t.Fatalf("locality %q, conflicts %v: want the oldest's (global) and a LocalityConflict", im.Locality, im.Conflicts)
	}
	for v, want := range map[string]string{"": "", "global": "", "local-first": LocalityLocalFirst, "remote-only": LocalityRemoteOnly, "Local": "!"} {
		se := &mcsv1.ServiceExport{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{}}}
		if v != "" {
			se.Annotations[AnnotationLocality] = v
		}
		got, err := LocalityOf(se)
		if want == "!" {
			if err == nil {
				t.Errorf("%q accepted", v)
			}
			continue
		}
		if err != nil || got != want {
			t.Errorf("%q: %q, %v; want %q", v, got, err, want)
		}
	}
}
