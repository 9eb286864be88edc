package podnet

import (
	"context"
	"time"

	"github.com/containernetworking/cni/pkg/types"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/kovn/kovn/pkg/cni"
)

// kovn-daemon's metrics, on controller-runtime's registry (its metrics port).
var (
	cniRequestSeconds = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "kovn_cni_request_duration_seconds",
		Help:    "CNI requests kovn-daemon answered, by command (ADD, DEL, CHECK) and result (success, or the CNI error).",
		Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120}}, []string{"command", "result"})
	podNetworkReadySeconds = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "kovn_pod_network_ready_seconds",
		Help: "Per pod of this node, from its PodScheduled condition to its network being up (CNI ADD answered once OVN " +
			"installed the port). The condition's time has one-second resolution.",
		Buckets: []float64{.5, 1, 2, 3, 5, 7.5, 10, 15, 20, 30, 60, 120}})
)

func init() { metrics.Registry.MustRegister(cniRequestSeconds, podNetworkReadySeconds) }

// CNIObserver records each CNI request's latency and, for a pod's successful ADD, how long its
// network took from scheduling (cni.Server's Observe).
type CNIObserver struct {
	Pods client.Reader // the daemon's cache: this node's pods
}

// Observe implements cni.Server's Observe hook.
func (o *CNIObserver) Observe(ctx context.Context, req *cni.Request, took time.Duration, cniErr *types.Error) {
	cniRequestSeconds.WithLabelValues(req.Command, resultLabel(cniErr)).Observe(took.Seconds())
	if req.Command != cni.CmdAdd || cniErr != nil || o.Pods == nil {
		return
	}
	var pod corev1.Pod
	if err := o.Pods.Get(ctx, k8stypes.NamespacedName{Namespace: req.PodNamespace, Name: req.PodName}, &pod); err != nil {
		return
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionTrue {
			podNetworkReadySeconds.Observe(time.Since(c.LastTransitionTime.Time).Seconds())
		}
	}
}

// resultLabel names a CNI outcome for the result label.
func resultLabel(e *types.Error) string {
	if e == nil {
		return "success"
	}
	switch e.Code {
	case types.ErrUnknownContainer:
		return "unknown_container"
	case types.ErrInvalidNetworkConfig:
		return "invalid_config"
	case types.ErrTryAgainLater:
		return "try_again_later"
	case types.ErrDecodingFailure, types.ErrInvalidEnvironmentVariables:
		return "invalid_request"
	default:
		return "internal"
	}
}
