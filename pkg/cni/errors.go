package cni

import (
	"context"
	"errors"

	"github.com/containernetworking/cni/pkg/types"

	"github.com/kovn/kovn/pkg/hostnet"
)

// Errors a Handler (or the Networks it uses) can wrap to choose the CNI error code the
// runtime sees; anything else becomes types.ErrInternal.
var (
	// ErrPodNotFound: the pod (or its sandbox) no longer exists. Mapped to
	// types.ErrUnknownContainer, which the spec defines as "nothing to clean up": the shim
	// turns it into success for DEL.
	ErrPodNotFound = errors.New("pod not found")
	// ErrTryAgain: a transient condition (the controller has not annotated the pod yet,
	// OVN has not installed the port). Mapped to types.ErrTryAgainLater, as are timeouts.
	ErrTryAgain = errors.New("pod network not ready")
	// ErrInvalidRequest: the request lacks a field its command needs.
	ErrInvalidRequest = errors.New("invalid CNI request")
	// ErrInvalidArgs: CNI_ARGS is malformed.
	ErrInvalidArgs = errors.New("invalid CNI_ARGS")
	// ErrDecoding: JSON that does not decode.
	ErrDecoding = errors.New("decoding failure")
	// ErrInvalidConfig: a network configuration or a pod network that makes no sense, or a
	// host set-up that cannot serve it (an underlay NIC missing). It is host networking's own
	// sentinel: one value, so whoever waits on a pod network (pkg/node/podnet) reads a refusal
	// from either side as final, not as "not yet".
	ErrInvalidConfig = hostnet.ErrInvalidConfig
	// ErrInvalidNetNS: CNI_NETNS cannot be used (missing, not a netns, the node's own). It is
	// host networking's own error, which entering a namespace that cannot be opened returns.
	ErrInvalidNetNS = hostnet.ErrInvalidNetNS
)

// AsCNIError maps err to the *types.Error the runtime sees; nil stays nil. A *types.Error
// anywhere in err's chain is returned as is; otherwise the code follows the sentinel
// errors above and the message is err's full text.
func AsCNIError(err error) *types.Error {
	if err == nil {
		return nil
	}
	var cniErr *types.Error
	if errors.As(err, &cniErr) {
		return cniErr
	}
	return types.NewError(errorCode(err), err.Error(), "")
}

// errorCode picks the CNI error code for err.
func errorCode(err error) uint {
	switch {
	case errors.Is(err, ErrPodNotFound):
		return types.ErrUnknownContainer
	case errors.Is(err, ErrTryAgain), errors.Is(err, context.DeadlineExceeded):
		return types.ErrTryAgainLater
	case errors.Is(err, ErrInvalidRequest), errors.Is(err, ErrInvalidArgs):
		return types.ErrInvalidEnvironmentVariables
	case errors.Is(err, ErrDecoding):
		return types.ErrDecodingFailure
	case errors.Is(err, ErrInvalidConfig):
		return types.ErrInvalidNetworkConfig
	case errors.Is(err, ErrInvalidNetNS):
		return types.ErrInvalidNetNS
	default:
		return types.ErrInternal
	}
}

// IsPodNotFound reports whether err is (or carries) the "pod is gone" error, local or
// as the daemon sent it.
func IsPodNotFound(err error) bool {
	var cniErr *types.Error
	if errors.As(err, &cniErr) {
		return cniErr.Code == types.ErrUnknownContainer
	}
	return errors.Is(err, ErrPodNotFound)
}
