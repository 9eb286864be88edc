package hostnet

import "errors"

var (
	// ErrInvalidNetNS: a network namespace path cannot be opened or entered.
	ErrInvalidNetNS = errors.New("invalid network namespace")
	// ErrInvalidConfig: the host's network set-up cannot serve what was asked of it (a
	// provider network's NIC is missing, OVS refused its bridge). The text is the CNI's
	// "invalid network configuration", which is what the runtime is told.
	ErrInvalidConfig = errors.New("invalid network configuration")
	// ErrNoIPv6 is returned by SetDisableIPv6 when the netns has no IPv6 (kernel or sysctl).
	ErrNoIPv6 = errors.New("IPv6 is unavailable in this network namespace")
)
