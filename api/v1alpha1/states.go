package v1alpha1

import (
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	mcsv1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
)

// InterConnect condition types and reasons beyond Ready. kubectl-kovn and the metrics match on
// them, so they live with the API rather than in the controller.
const (
	// ConditionRoutesAccepted is False while a remote AZ advertises a prefix overlapping one
	// of this cluster's subnets; the message names both.
	ConditionRoutesAccepted = "RoutesAccepted"

	ReasonICUnreachable   = "ICDatabaseUnreachable"
	ReasonWaitingForOVNIC = "WaitingForOVNIC"
	ReasonNoGateway       = "NoGateway"
	ReasonRouteConflict   = "RouteConflict"
	// ReasonRouteRefused: a peer advertises a route it may not claim (outside the subnets it
	// declared, a default route, or overlapping an earlier AZ's); it is never routed to.
	ReasonRouteRefused = "RouteRefused"
	ReasonNoConflict   = "NoConflict"
	// ReasonAZNameTaken: Ready=False because another cluster of the clusterset holds the AZ
	// name; nothing of that AZ is changed.
	ReasonAZNameTaken = "AZNameTaken"
	// ReasonAZNameNotCertified: Ready=False because the clusterset certificate names other AZs
	// than azName (its CN and DNS names): the IC-SB relay would refuse its writes as azName, so
	// the cluster stays as it was.
	ReasonAZNameNotCertified = "AZNameNotCertified"

	// ConditionDegraded is True for a while (DegradedHold) after kovn found this AZ's join
	// record in IC-NB changed or deleted by someone else and put it back; the message says
	// what it found. OVN-IC's databases have no access control: any AZ's certificate can
	// write them, so kovn watches what is this cluster's.
	ConditionDegraded    = "Degraded"
	ReasonRecordTampered = "RecordTampered"
	ReasonRecordsIntact  = "RecordsIntact"
	// ReasonUnknownAZ: an AZ is on kovn's transit switches without a join record.
	ReasonUnknownAZ = "UnknownAZ"

	// ConditionClustersetPeersCurrent is False while the clusterset store is unreachable:
	// NetworkPolicy and ClusterNetworkPolicy peers in other clusters stay as last read.
	ConditionClustersetPeersCurrent = "ClustersetPeersCurrent"
	ReasonStoreUnreachable          = "StoreUnreachable"
	ReasonFollowingStore            = "FollowingStore"

	// ConditionCredentialsReady is False while the Secret TLSSecretName cannot be read or does
	// not hold a usable certificate, key and CA; the message names the Secret and what is
	// wrong. The last good credentials stay in use meanwhile.
	ConditionCredentialsReady = "CredentialsReady"
	ReasonCredentialsLoaded   = "Loaded"
	ReasonCredentialsInvalid  = "SecretInvalid"
	ReasonPlainTCP            = "InsecurePlainTCP"
)

// One word for a ServiceExport's state, as the metrics label it and kubectl-kovn shows it.
const (
	ExportStateInvalid  = "invalid"
	ExportStateConflict = "conflict"
	ExportStateExported = "exported"
	ExportStatePending  = "pending"
)

// ExportStates lists every ExportState value, so a gauge can report zeros.
var ExportStates = []string{ExportStateExported, ExportStateConflict, ExportStateInvalid, ExportStatePending}

// ExportState reads a ServiceExport's conditions, the worst first: Valid=False, then
// Conflict=True, then Ready=True; anything else is still pending.
func ExportState(conds []metav1.Condition) string {
	switch {
	case meta.IsStatusConditionFalse(conds, string(mcsv1.ServiceExportConditionValid)):
		return ExportStateInvalid
	case meta.IsStatusConditionTrue(conds, string(mcsv1.ServiceExportConditionConflict)):
		return ExportStateConflict
	case meta.IsStatusConditionTrue(conds, string(mcsv1.ServiceExportConditionReady)):
		return ExportStateExported
	}
	return ExportStatePending
}
