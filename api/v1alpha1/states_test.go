package v1alpha1

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	mcsv1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
)

func TestExportState(t *testing.T) {
	cond := func(typ mcsv1.ServiceExportConditionType, s metav1.ConditionStatus) metav1.Condition {
		return metav1.Condition{Type: string(typ), Status: s}
	}
	for _, tc := range []struct {
		conds []metav1.Condition
		want  string
	}{
		{nil, ExportStatePending},
		{[]metav1.Condition{cond(mcsv1.ServiceExportConditionValid, metav1.ConditionTrue), cond(mcsv1.ServiceExportConditionReady, metav1.ConditionFalse)}, ExportStatePending},
		{[]metav1.Condition{cond(mcsv1.ServiceExportConditionValid, metav1.ConditionTrue), cond(mcsv1.ServiceExportConditionReady, metav1.ConditionTrue)}, ExportStateExported},
		// A conflict outranks Ready: the export is served, but not as every cluster wrote it.
		{[]metav1.Condition{cond(mcsv1.ServiceExportConditionReady, metav1.ConditionTrue), cond(mcsv1.ServiceExportConditionConflict, metav1.ConditionTrue)}, ExportStateConflict},
		{[]metav1.Condition{cond(mcsv1.ServiceExportConditionValid, metav1.ConditionFalse), cond(mcsv1.ServiceExportConditionConflict, metav1.ConditionTrue)}, ExportStateInvalid},
	} {
		if got := ExportState(tc.conds); got != tc.want {
			t.Errorf("%v: %s, want %s", tc.conds, got, tc.want)
		}
	}
}
