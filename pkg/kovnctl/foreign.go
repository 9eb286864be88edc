package kovnctl

import (
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kovnv1 "github.com/kovn/kovn/api/v1alpha1"
)

// ForeignAZStatus is one ForeignAZ: the foreign AZ, what crosses, and whether it is peered.
type ForeignAZStatus struct {
	Name       string   `json:"name"`
	AZ         string   `json:"az"`
	Ready      string   `json:"ready"`
	Message    string   `json:"message,omitempty"`
	Advertised []string `json:"advertised"`
	Learned    []string `json:"learned"`
	Refused    []string `json:"refused,omitempty"`
	// Mismatch is the RoutesAgreed condition's message while it is False.
	Mismatch string `json:"mismatch,omitempty"`
}

// foreignAZs reports each ForeignAZ; one not peered, or whose routes differ from the
// agreement, is a problem.
func (r *Report) foreignAZs(in Inputs) {
	for i := range in.ForeignAZs {
		f := &in.ForeignAZs[i]
		s := ForeignAZStatus{Name: f.Name, AZ: f.Spec.AZ, Ready: "Unknown", Advertised: f.Status.Advertised,
			Learned: f.Status.Learned, Refused: f.Status.Refused}
		obj := "foreignaz/" + f.Name
		if c := meta.FindStatusCondition(f.Status.Conditions, kovnv1.ConditionReady); c != nil {
			s.Ready = string(c.Status)
			if c.Status != metav1.ConditionTrue {
				s.Message = c.Message
				r.problem(obj, c.Reason+": "+c.Message, foreignFix(c.Reason))
			}
		}
		if c := meta.FindStatusCondition(f.Status.Conditions, kovnv1.ConditionRoutesAgreed); c != nil && c.Status == metav1.ConditionFalse {
			s.Mismatch = c.Message
			r.problem(obj, "routes differ from the agreement: "+c.Message,
				"agree with the foreign AZ's operators, then change spec.acceptCIDRs/advertiseCIDRs or what they advertise")
		}
		r.ForeignAZs = append(r.ForeignAZs, s)
	}
}

func foreignFix(reason string) string {
	switch reason {
	case kovnv1.ReasonValidationFailed:
		return "fix the ForeignAZ's spec (kubectl describe foreignaz); the last valid one stays programmed"
	case kovnv1.ReasonNotInterconnected:
		return "apply the cluster's InterConnect: a ForeignAZ peers through its IC databases and gateways"
	}
	return icFix(reason)
}
