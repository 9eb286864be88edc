package bootstrap

// Permissions kovn-daemon needs beyond the markers beside its reconciler. `make generate` turns
// every +kubebuilder:rbac marker of this package into deploy/rbac/daemon/role.yaml, which the
// rig applies as is. Which Node a daemon may change is not RBAC's to say: see
// deploy/policy/daemon-own-node.yaml.

// The daemon takes pod addresses from IP objects, which only the controller writes (issue 13:
// pod annotations are requests, not facts). Read-only on purpose.
// +kubebuilder:rbac:groups=kovn.io,resources=ips,verbs=get;list;watch
