package node

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kovn/kovn/pkg/annotation"
	"github.com/kovn/kovn/pkg/cni"
)

// PodNetworks implements cni.Networks from the annotations kovn-controller writes on pods.
type PodNetworks struct {
	Client client.Reader // the daemon's cache (pods of this node only)
	MTU    int
	Poll   time.Duration
}

var _ cni.Networks = (*PodNetworks)(nil)

// WaitPodNetwork polls the cache until the pod is allocated. Polling the local cache is cheap
// and keeps the daemon free of per-pod watch plumbing.
func (p *PodNetworks) WaitPodNetwork(ctx context.Context, namespace, name, uid string) (*cni.PodNetwork, error) {
	poll := p.Poll
	if poll == 0 {
		poll = 50 * time.Millisecond
	}
	var lastErr error
	for {
		var pod corev1.Pod
		err := p.Client.Get(ctx, types.NamespacedName{Namespace: namespace, Name: name}, &pod)
		switch {
		case apierrors.IsNotFound(err):
			lastErr = fmt.Errorf("pod %s/%s: %w", namespace, name, cni.ErrPodNotFound)
		case err != nil:
			lastErr = err
		case uid != "" && string(pod.UID) != uid:
			lastErr = fmt.Errorf("pod %s/%s has uid %s, not %s: %w", namespace, name, pod.UID, uid, cni.ErrPodNotFound)
		default:
			pn, ok, perr := annotation.PodNetworkFrom(pod.Annotations)
			if perr != nil {
				return nil, fmt.Errorf("pod %s/%s: %w", namespace, name, perr)
			}
			if ok {
				return p.convert(pn)
			}
			lastErr = fmt.Errorf("pod %s/%s: kovn-controller has not allocated its addresses yet (see the pod's events)", namespace, name)
		}
		select {
		case <-ctx.Done():
			return nil, errors.Join(lastErr, ctx.Err())
		case <-time.After(poll):
		}
	}
}

func (p *PodNetworks) convert(pn annotation.PodNetwork) (*cni.PodNetwork, error) {
	mac, err := net.ParseMAC(pn.MAC)
	if err != nil {
		return nil, err
	}
	out := &cni.PodNetwork{MAC: mac, MTU: p.MTU, PortName: pn.PortName, Gateways: pn.Gateways}
	for i, ip := range pn.IPs {
		out.IPs = append(out.IPs, netip.PrefixFrom(ip, pn.CIDRs[i].Bits()))
	}
	return out, nil
}
