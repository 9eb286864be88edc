package mcs

import (
	"fmt"

	mcsv1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
)

// AnnotationLocality on a ServiceExport says where the clusters importing the Service send
// its traffic: "global" (or no annotation: every exporting cluster alike), "local-first" (a
// cluster's own ready endpoints while it has any, the other clusters' only when it has none)
// or "remote-only" (never the importing cluster's own endpoints). The oldest export's value is
// the import's, as for every other property; a differing one is a LocalityConflict.
const AnnotationLocality = "mcs.kovn.io/locality"

// The values of AnnotationLocality (Export.Locality holds "" for global).
const (
	LocalityGlobal     = "global"
	LocalityLocalFirst = "local-first"
	LocalityRemoteOnly = "remote-only"
)

// ReasonLocalityConflict is the Conflict reason of exports that disagree on AnnotationLocality.
const ReasonLocalityConflict mcsv1.ServiceExportConditionReason = "LocalityConflict"

// LocalityOf is se's locality as Export.Locality holds it, or an error naming the values
// allowed.
func LocalityOf(se *mcsv1.ServiceExport) (string, error) {
	switch v, set := se.Annotations[AnnotationLocality]; {
	case !set || v == LocalityGlobal:
		return "", nil
	case v == LocalityLocalFirst || v == LocalityRemoteOnly:
		return v, nil
	default:
		return "", fmt.Errorf("annotation %s: unknown value %q (%s, %s or %s)", AnnotationLocality, v,
			LocalityGlobal, LocalityLocalFirst, LocalityRemoteOnly)
	}
}

// localServes is, per address type, the import ports (portKey) that local's own endpoints
// take under local-first, leaving them to no other cluster: the ports local serves in a slice
// with a ready endpoint. Nil for every other locality (remote-only is servesHere's alone).
func localServes(im Import, store []Slice, local string) map[string]map[string]bool {
	if im.Locality != LocalityLocalFirst {
		return nil
	}
	out := map[string]map[string]bool{}
	for _, s := range store {
		if s.Cluster != local || !sliceReady(s) {
			continue
		}
		if out[s.AddressType] == nil {
			out[s.AddressType] = map[string]bool{}
		}
		for _, p := range s.Ports {
			if im.Serves[local][portKey(p)] {
				out[s.AddressType][portKey(p)] = true
			}
		}
	}
	return out
}

// sliceReady says whether s has a ready endpoint.
func sliceReady(s Slice) bool {
	for _, e := range s.Endpoints {
		if e.Ready {
			return true
		}
	}
	return false
}

// servesHere says whether slice s's port p carries traffic in the importing cluster local:
// the cluster exposes the port (KEP-1645), and the locality leaves it to the cluster (taken
// is localServes).
func servesHere(im Import, s Slice, p Port, local string, taken map[string]map[string]bool) bool {
	switch {
	case !im.Serves[s.Cluster][portKey(p)]:
		return false
	case im.Locality == LocalityRemoteOnly:
		return s.Cluster != local
	case s.Cluster != local:
		return !taken[s.AddressType][portKey(p)]
	}
	return true
}
