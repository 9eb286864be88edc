package cluster

// Permissions kovn-controller needs that no reconciler's own markers declare yet. `make generate`
// turns every +kubebuilder:rbac marker of this package into deploy/rbac/controller/role.yaml,
// which the rig applies as is: a missing verb shows up as a Forbidden in the e2e tests.

// IPPoolReconciler writes the pool's conditions and usage through the status subresource.
// +kubebuilder:rbac:groups=kovn.io,resources=ippools/status,verbs=get;update;patch

// Needed by work already planned (issue 13: addresses owned by IP objects, custom VPCs):
// IP status, the Subnet finalizer (an OwnerReferencesPermissionEnforcement cluster checks
// finalizers on the subresource) and VPCs the controller creates and reports on.
// +kubebuilder:rbac:groups=kovn.io,resources=ips/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=kovn.io,resources=subnets/finalizers,verbs=update
// +kubebuilder:rbac:groups=kovn.io,resources=vpcs,verbs=get;list;watch;create;update;patch
// +kubebuilder:rbac:groups=kovn.io,resources=vpcs/status,verbs=get;update;patch
