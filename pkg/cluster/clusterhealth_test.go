package cluster

import (
	"slices"
	"testing"

	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

type downClusters []string

func (d downClusters) Unreachable(c string) bool { return slices.Contains(d, c) }
func (downClusters) OnChange(func())             {}

// Imported slices of an unreachable cluster leave the Service's endpoints; the cluster's own
// slices, and a slice that only claims the label (not written by kovn's imports), stay.
func TestReachableSlices(t *testing.T) {
	slice := func(name, managedBy, source string) discoveryv1.EndpointSlice {
		return discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{
			discoveryv1.LabelManagedBy: managedBy, LabelSourceCluster: source}}}
	}
	list := []discoveryv1.EndpointSlice{
		slice("from-az2", ImportedSliceManager, "az2"),
		slice("from-az3", ImportedSliceManager, "az3"),
		slice("own", "endpointslice-controller.k8s.io", ""),
		slice("claims-az2", "someone", "az2"),
	}
	var got []string
	for _, s := range reachableSlices(list, downClusters{"az2"}) {
		got = append(got, s.Name)
	}
	if !slices.Equal(got, []string{"from-az3", "own", "claims-az2"}) {
		t.Fatalf("slices kept %v", got)
	}
	if n := len(reachableSlices(list, nil)); n != 4 {
		t.Fatalf("no health: %d slices kept, want 4", n)
	}
}
