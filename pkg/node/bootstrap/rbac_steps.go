package bootstrap

// The node steps report failures and recoveries as events on the Node (report.go). The
// recorder creates events and patches them when it aggregates repeats.
// +kubebuilder:rbac:groups="",resources=events,verbs=create;patch
