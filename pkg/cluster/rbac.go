package cluster

// Permissions kovn-controller needs beside the reconcilers' own markers. `make generate`
// turns every +kubebuilder:rbac marker of this package into deploy/rbac/controller/role.yaml,
// which the rig applies as is: a missing verb shows up as a Forbidden in the e2e tests.

// IPPoolReconciler writes the pool's conditions and usage through the status subresource.
// +kubebuilder:rbac:groups=kovn.io,resources=ippools/status,verbs=get;update;patch

// The Subnet finalizer (an OwnerReferencesPermissionEnforcement cluster checks finalizers on
// the subresource) and the VPCs the controller creates (the default one) and reports on.
// +kubebuilder:rbac:groups=kovn.io,resources=subnets/finalizers,verbs=update
// +kubebuilder:rbac:groups=kovn.io,resources=vpcs,verbs=get;list;watch;create
// +kubebuilder:rbac:groups=kovn.io,resources=vpcs/status,verbs=get;update;patch
