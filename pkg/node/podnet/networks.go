package podnet

import (
	"context"
	"errors"
	"fmt"
	"github.com/kovn/kovn/pkg/netattach"
	"net"
	"net/netip"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kovnv1 "github.com/kovn/kovn/api/v1alpha1"
	"github.com/kovn/kovn/pkg/cni"
	"github.com/kovn/kovn/pkg/contract"
)

// +kubebuilder:rbac:groups=kovn.io,resources=ips,verbs=get;list;watch

// PodNetworks implements cni.Networks from the pod's IP object, which only kovn-controller
// may write (RBAC), and the Subnet it names. The pod's own annotations are never read: anyone
// who may create a pod can write them, so an address taken from them could be anyone's.
type PodNetworks struct {
	Client   client.Reader // the daemon's cache: this node's pods and IP objects, every Subnet
	NodeName string
	MTU      int
	Poll     time.Duration
	// Underlay, when set, is asked whether this node can host a pod of an underlay subnet.
	Underlay interface {
		VlanReady(ctx context.Context, vlan string) error
	}
	// Live reads NetworkAttachmentDefinitions and Namespaces (a direct API reader: only pods
	// with attachment networks need them); nil refuses attachments.
	Live client.Reader
	// Delegates are the plugin types and node interfaces attachment delegates may use (the
	// same as kovn-controller's, so both refuse the same definitions).
	Delegates netattach.DelegatePolicy
	// IgnoreAttachments leaves the pods' k8s.v1.cni.cncf.io/networks to a meta-plugin
	// (Multus) that calls kovn-cni as the default network only: eth0 alone is plumbed.
	IgnoreAttachments bool
}

var _ cni.Networks = (*PodNetworks)(nil)

// WaitPodNetwork polls the cache until the controller recorded the pod's addresses for this
// node. Polling the local cache is cheap and keeps the daemon free of per-pod watch plumbing.
func (p *PodNetworks) WaitPodNetwork(ctx context.Context, namespace, name, uid string) (*cni.PodNetwork, error) {
	poll := p.Poll
	if poll == 0 {
		poll = 50 * time.Millisecond
	}
	// Definitions are read from the API server once per wait, not at every poll: a pod whose
	// attachment the controller cannot allocate would otherwise cost requests each 50 ms.
	defs := definitions{}
	for {
		pn, err := p.podNetwork(ctx, namespace, name, uid, defs)
		if err == nil || errors.Is(err, cni.ErrPodNotFound) || errors.Is(err, cni.ErrInvalidConfig) {
			return pn, err
		}
		select {
		case <-ctx.Done():
			return nil, errors.Join(err, ctx.Err())
		case <-time.After(poll):
		}
	}
}

// podNetwork reads the pod's network once; a plain error means "not yet".
func (p *PodNetworks) podNetwork(ctx context.Context, namespace, name, uid string, defs definitions) (*cni.PodNetwork, error) {
	var pod corev1.Pod
	err := p.Client.Get(ctx, types.NamespacedName{Namespace: namespace, Name: name}, &pod)
	switch {
	case apierrors.IsNotFound(err):
		return nil, fmt.Errorf("pod %s/%s: %w", namespace, name, cni.ErrPodNotFound)
	case err != nil:
		return nil, err
	case uid != "" && string(pod.UID) != uid:
		return nil, fmt.Errorf("pod %s/%s has uid %s, not %s: %w", namespace, name, pod.UID, uid, cni.ErrPodNotFound)
	}
	var ip kovnv1.IP
	port := contract.PodPortName(namespace, name)
	if err := p.Client.Get(ctx, types.NamespacedName{Name: port}, &ip); err != nil {
		return nil, fmt.Errorf("pod %s/%s: kovn-controller has not recorded its addresses yet (IP %s: %v; see the pod's events)", namespace, name, port, err)
	}
	if ip.Spec.Namespace != namespace || ip.Spec.PodName != name || ip.Spec.NodeName != p.NodeName {
		return nil, fmt.Errorf("pod %s/%s: IP %s is recorded for %s/%s on node %q, not yet for this pod on %s",
			namespace, name, port, ip.Spec.Namespace, ip.Spec.PodName, ip.Spec.NodeName, p.NodeName)
	}
	var sn kovnv1.Subnet
	if err := p.Client.Get(ctx, types.NamespacedName{Name: ip.Spec.Subnet}, &sn); err != nil {
		return nil, fmt.Errorf("pod %s/%s: subnet %s: %v", namespace, name, ip.Spec.Subnet, err)
	}
	if sn.Spec.Vlan != "" && p.Underlay != nil {
		if err := p.Underlay.VlanReady(ctx, sn.Spec.Vlan); err != nil {
			return nil, fmt.Errorf("pod %s/%s: underlay subnet %s: %w", namespace, name, sn.Name, err)
		}
	}
	pn, err := p.convert(&ip, &sn, port)
	if err != nil {
		return nil, err
	}
	if p.IgnoreAttachments {
		return pn, nil
	}
	if pn.Attachments, err = p.attachments(ctx, &pod, defs); err != nil {
		return nil, fmt.Errorf("pod %s/%s: %w", namespace, name, err)
	}
	return pn, nil
}

// convert builds the CNI's view: each address with its CIDR's prefix length and the gateway
// of its CIDR.
func (p *PodNetworks) convert(ip *kovnv1.IP, sn *kovnv1.Subnet, port string) (*cni.PodNetwork, error) {
	mac, err := net.ParseMAC(ip.Spec.MACAddress)
	if err != nil {
		return nil, fmt.Errorf("%w: IP %s: MAC %q", cni.ErrInvalidConfig, ip.Name, ip.Spec.MACAddress)
	}
	cidrs, err := sn.Spec.CIDRs()
	if err != nil {
		return nil, fmt.Errorf("%w: subnet %s: %v", cni.ErrInvalidConfig, sn.Name, err)
	}
	gws, err := sn.Spec.EffectiveGateways()
	if err != nil {
		return nil, fmt.Errorf("%w: subnet %s: %v", cni.ErrInvalidConfig, sn.Name, err)
	}
	addrs, err := ip.Spec.Addrs()
	if err != nil {
		return nil, fmt.Errorf("%w: IP %s: %v", cni.ErrInvalidConfig, ip.Name, err)
	}
	out := &cni.PodNetwork{MAC: mac, MTU: p.MTU, PortName: port}
	for _, a := range addrs {
		i := cidrIndex(cidrs, a)
		if i < 0 {
			return nil, fmt.Errorf("%w: IP %s: %s is outside subnet %s", cni.ErrInvalidConfig, ip.Name, a, sn.Name)
		}
		out.IPs = append(out.IPs, netip.PrefixFrom(a, cidrs[i].Bits()))
		out.Gateways = append(out.Gateways, gws[i])
	}
	return out, nil
}

func cidrIndex(cidrs []netip.Prefix, a netip.Addr) int {
	for i, c := range cidrs {
		if c.Contains(a) {
			return i
		}
	}
	return -1
}
