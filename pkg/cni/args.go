package cni

import (
	"fmt"
	"strings"
)

// Keys the Kubernetes runtimes put into CNI_ARGS.
const (
	argPodNamespace = "K8S_POD_NAMESPACE"
	argPodName      = "K8S_POD_NAME"
	argInfraID      = "K8S_POD_INFRA_CONTAINER_ID"
	argPodUID       = "K8S_POD_UID"
)

// PodArgs are the Kubernetes keys of CNI_ARGS.
type PodArgs struct {
	Namespace        string
	Name             string
	InfraContainerID string
	UID              string
}

// ParsePodArgs parses CNI_ARGS ("K1=V1;K2=V2;..."). containerd builds it from a Go map, so
// the order of the pairs changes from call to call: keys are looked up by name. Unknown
// keys (IgnoreUnknown and whatever other runtimes add) are ignored; a pair without "=" or
// a known key given twice with different values is an error.
func ParsePodArgs(s string) (PodArgs, error) {
	var a PodArgs
	fields := map[string]*string{
		argPodNamespace: &a.Namespace,
		argPodName:      &a.Name,
		argInfraID:      &a.InfraContainerID,
		argPodUID:       &a.UID,
	}
	for _, pair := range strings.Split(s, ";") {
		pair = strings.TrimSpace(pair)
		if pair == "" {
			continue
		}
		k, v, ok := strings.Cut(pair, "=")
		if !ok {
			return PodArgs{}, fmt.Errorf("%w: CNI_ARGS pair %q has no '='", ErrInvalidArgs, pair)
		}
		dst, known := fields[strings.TrimSpace(k)]
		if !known {
			continue
		}
		v = strings.TrimSpace(v)
		if *dst != "" && *dst != v {
			return PodArgs{}, fmt.Errorf("%w: CNI_ARGS sets %s twice (%q and %q)", ErrInvalidArgs, k, *dst, v)
		}
		*dst = v
	}
	return a, nil
}
