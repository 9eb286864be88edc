package podnet

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/netip"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nadv1 "github.com/kovn/kovn/api/nad/v1"
	kovnv1 "github.com/kovn/kovn/api/v1alpha1"
	"github.com/kovn/kovn/pkg/cni"
	"github.com/kovn/kovn/pkg/contract"
	"github.com/kovn/kovn/pkg/netattach"
)

// +kubebuilder:rbac:groups=k8s.cni.cncf.io,resources=network-attachment-definitions,verbs=get
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get

// attachments resolves the pod's k8s.v1.cni.cncf.io/networks exactly as kovn-controller does
// (netattach's parse and sharing rules), taking every kovn address from the controller's IP
// objects, never from the annotation. A refusal (a malformed annotation or definition, a
// definition of a namespace not shared) is ErrInvalidConfig: the pod gets no interface at
// all. A plain error means "not yet" (the controller has not recorded an address).
func (p *PodNetworks) attachments(ctx context.Context, pod *corev1.Pod, defs definitions) ([]cni.Attachment, error) {
	sels, err := netattach.ParseSelections(pod.Annotations[netattach.NetworksAnnotation], pod.Namespace)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", cni.ErrInvalidConfig, err)
	}
	// Every definition is read and checked before any record is awaited: a refusal of the
	// last one fails the pod at once instead of after the wait for the first one's record
	// (which kovn-controller never writes, allocating all or nothing).
	resolved := make([]netattach.Attachment, len(sels))
	for i, sel := range sels {
		a, ok := defs[sel.Key()]
		if !ok {
			if a, err = p.definition(ctx, pod.Namespace, sel); err != nil {
				return nil, err
			}
			defs[sel.Key()] = a
		}
		resolved[i] = a
	}
	var out []cni.Attachment
	for i, sel := range sels {
		a := resolved[i]
		if a.Kind != netattach.KindKovn && len(sel.DefaultRoute) > 0 {
			return nil, fmt.Errorf("%w: network %s (%s): default-route is supported on kovn attachments only, not on %s", cni.ErrInvalidConfig, sel.Key(), sel.Interface, a.Plugin)
		}
		att := cni.Attachment{IfName: sel.Interface, Network: sel.Key()}
		var port *cni.PodNetwork
		if a.KovnIPAM {
			if port, err = p.attachmentNetwork(ctx, pod, sel); err != nil {
				return nil, err
			}
		}
		if a.Kind == netattach.KindKovn {
			att.Port = port
			out = append(out, att)
			continue
		}
		var addrs []netip.Prefix
		if port != nil {
			addrs = port.IPs
		}
		if att.Config, err = netattach.DelegateConfig(a, addrs); err != nil {
			return nil, fmt.Errorf("%w: %v", cni.ErrInvalidConfig, err)
		}
		att.Plugin = a.Plugin
		if sel.MAC != "" {
			if att.MAC, err = net.ParseMAC(sel.MAC); err != nil {
				return nil, fmt.Errorf("%w: network %s: mac %q: %v", cni.ErrInvalidConfig, sel.Key(), sel.MAC, err)
			}
		}
		out = append(out, att)
	}
	return out, nil
}

// definitions are the definitions one wait has read, by "namespace/name".
type definitions map[string]netattach.Attachment

// definition reads and parses the selection's NetworkAttachmentDefinition, after checking
// the pod may use it. Read from the API server, not a cache: only pods with attachments ask.
func (p *PodNetworks) definition(ctx context.Context, podNS string, sel netattach.Selection) (netattach.Attachment, error) {
	if p.Live == nil {
		return netattach.Attachment{}, fmt.Errorf("%w: network %s: this kovn-daemon does not serve attachment networks", cni.ErrInvalidConfig, sel.Key())
	}
	if sel.Namespace != podNS {
		var ns corev1.Namespace
		_ = p.Live.Get(ctx, types.NamespacedName{Name: sel.Namespace}, &ns) // unreadable: not shared
		if err := netattach.CheckNamespace(sel, podNS, ns.Annotations); err != nil {
			return netattach.Attachment{}, fmt.Errorf("%w: %v", cni.ErrInvalidConfig, err)
		}
	}
	var nad nadv1.NetworkAttachmentDefinition
	err := p.Live.Get(ctx, types.NamespacedName{Namespace: sel.Namespace, Name: sel.Name}, &nad)
	switch {
	case apierrors.IsNotFound(err):
		return netattach.Attachment{}, fmt.Errorf("%w: network %s: no such NetworkAttachmentDefinition", cni.ErrInvalidConfig, sel.Key())
	case err != nil:
		return netattach.Attachment{}, fmt.Errorf("network %s: reading its NetworkAttachmentDefinition: %v", sel.Key(), err)
	}
	a, err := netattach.ParseNAD(sel.Key(), nad.Spec.Config, p.Delegates)
	if err != nil {
		return a, fmt.Errorf("%w: %v", cni.ErrInvalidConfig, err)
	}
	return a, nil
}

// attachmentNetwork is what kovn-controller recorded for one attachment: its IP object (for
// this pod, interface and network, on this node) and the Subnet providing that network.
// Gateways are only those the pod named in default-route.
func (p *PodNetworks) attachmentNetwork(ctx context.Context, pod *corev1.Pod, sel netattach.Selection) (*cni.PodNetwork, error) {
	name := contract.AttachmentPortName(pod.Namespace, pod.Name, sel.Interface)
	var ip kovnv1.IP
	if err := p.Client.Get(ctx, types.NamespacedName{Name: name}, &ip); err != nil {
		return nil, fmt.Errorf("network %s (%s): kovn-controller has not recorded its addresses yet (IP %s: %v; see the pod's events)",
			sel.Key(), sel.Interface, name, err)
	}
	s := ip.Spec
	if s.Namespace != pod.Namespace || s.PodName != pod.Name || s.NodeName != p.NodeName || s.Interface != sel.Interface || s.Network != sel.Key() {
		return nil, fmt.Errorf("network %s (%s): IP %s is recorded for %s/%s (%s, network %s) on node %q, not yet for this attachment",
			sel.Key(), sel.Interface, name, s.Namespace, s.PodName, s.Interface, s.Network, s.NodeName)
	}
	var sn kovnv1.Subnet
	if err := p.Client.Get(ctx, types.NamespacedName{Name: s.Subnet}, &sn); err != nil {
		return nil, fmt.Errorf("network %s: subnet %s: %v", sel.Key(), s.Subnet, err)
	}
	if sn.Spec.Provider != sel.Key() {
		return nil, fmt.Errorf("%w: network %s: subnet %s provides %q, not this network", cni.ErrInvalidConfig, sel.Key(), sn.Name, sn.Spec.Provider)
	}
	if sn.Spec.Vlan != "" && p.Underlay != nil { // an underlay Subnet: this node must be on its network, as for eth0
		if err := p.Underlay.VlanReady(ctx, sn.Spec.Vlan); err != nil {
			return nil, fmt.Errorf("network %s: underlay subnet %s: %w", sel.Key(), sn.Name, err)
		}
	}
	pn, err := p.convert(&ip, &sn, name)
	if err != nil {
		return nil, err
	}
	pn.Gateways = nil
	for _, g := range sel.DefaultRoute {
		gw, err := netip.ParseAddr(g)
		if err != nil {
			return nil, fmt.Errorf("%w: network %s: default-route %q: %v", cni.ErrInvalidConfig, sel.Key(), g, err)
		}
		pn.Gateways = append(pn.Gateways, gw)
	}
	return pn, nil
}

// +kubebuilder:rbac:groups="",resources=pods/status,verbs=patch

// NetworkStatusPublisher writes a pod's k8s.v1.cni.cncf.io/network-status through the pod's
// status subresource (as Multus does). Only that annotation, only pods of the daemon's own
// node: deploy/policy/daemon-network-status.yaml holds the daemon to it.
type NetworkStatusPublisher struct {
	Client client.Client
}

// SetNetworkStatus implements cni.NetworkStatusWriter. The uid makes the patch fail for a
// pod of the same name created since.
func (w *NetworkStatusPublisher) SetNetworkStatus(ctx context.Context, namespace, name, uid string, statuses []netattach.NetworkStatus) error {
	v, err := netattach.FormatStatus(statuses)
	if err != nil {
		return err
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"uid": uid,
		"annotations": map[string]string{netattach.NetworkStatusAnnotation: v}}})
	if err != nil {
		return err
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}}
	return w.Client.Status().Patch(ctx, pod, client.RawPatch(types.MergePatchType, patch))
}
