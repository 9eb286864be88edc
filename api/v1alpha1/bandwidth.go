package v1alpha1

import (
	"fmt"

	"k8s.io/apimachinery/pkg/api/resource"
)

// The pod annotations of the CNI bandwidth convention: bits per second as a Kubernetes
// quantity ("50M" is 50,000,000 bit/s). Ingress is traffic to the pod, egress from it.
const (
	AnnotationIngressBandwidth = "kubernetes.io/ingress-bandwidth"
	AnnotationEgressBandwidth  = "kubernetes.io/egress-bandwidth"
)

// Bandwidth limits are enforced by OVN QoS meters, whose rate is in kbit/s and at most
// 4294967295 (the NB schema's bound): 1k .. 4294967295k is what a meter can hold.
const (
	MinBandwidthKbps = 1
	MaxBandwidthKbps = 4294967295
)

// ParseBandwidth reads a bandwidth in the annotations' syntax and returns it in kbit/s,
// rounded down; a value that is not a quantity, not a whole number of kbit/s once rounded,
// or outside MinBandwidthKbps..MaxBandwidthKbps is an error saying so.
func ParseBandwidth(s string) (int, error) {
	q, err := resource.ParseQuantity(s)
	if err != nil {
		return 0, fmt.Errorf("%q is not a bandwidth in bit/s (e.g. 50M, 1G): %v", s, err)
	}
	bps := q.Value()
	if q.Sign() <= 0 || bps/1000 < MinBandwidthKbps {
		return 0, fmt.Errorf("%q is below the smallest limit, 1k (1000 bit/s)", s)
	}
	if q.Cmp(*resource.NewQuantity(MaxBandwidthKbps*1000, resource.DecimalSI)) > 0 {
		return 0, fmt.Errorf("%q is above the largest limit OVN's meters hold, 4294967295k", s)
	}
	return int(bps / 1000), nil
}

// PodBandwidth is a Subnet's default limit for each of its pods, in the syntax of the pods'
// bandwidth annotations. A pod's own annotation may set a lower limit, never a higher one:
// the Subnet's is the admin's, the annotation the pod owner's.
type PodBandwidth struct {
	// Ingress limits traffic to each pod, e.g. "100M".
	// +kubebuilder:validation:MaxLength=32
	// +optional
	Ingress string `json:"ingress,omitempty"`
	// Egress limits traffic from each pod.
	// +kubebuilder:validation:MaxLength=32
	// +optional
	Egress string `json:"egress,omitempty"`
}

// validate checks both limits.
func (b *PodBandwidth) validate(errs *ValidationErrors) {
	if b == nil {
		return
	}
	for _, l := range []struct{ field, value string }{{"ingress", b.Ingress}, {"egress", b.Egress}} {
		if l.value == "" {
			continue
		}
		if _, err := ParseBandwidth(l.value); err != nil {
			errs.add("spec.podBandwidth."+l.field, ReasonInvalidBandwidth, "%v", err)
		}
	}
}
