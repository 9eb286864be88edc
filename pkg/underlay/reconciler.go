package underlay

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	libovsdb "github.com/ovn-org/libovsdb/client"
	"github.com/vishvananda/netlink"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	kovnv1 "github.com/kovn/kovn/api/v1alpha1"
	"github.com/kovn/kovn/pkg/hostnet"
	"github.com/kovn/kovn/pkg/ovn"
)

// Reconciler keeps this node's provider bridges as the ProviderNetworks say, level-triggered:
// every event means "sync all of this node's provider networks". A network that fails on this
// node (no such NIC, OVS refusing the bridge) is reported in its status and leaves the others
// alone.
type Reconciler struct {
	client.Client
	OVS      libovsdb.Client
	NodeName string
	// Integration is br-int: provider bridges take its datapath type.
	Integration string
	Recorder    record.EventRecorder

	mu      sync.Mutex
	outcome map[string]result // by provider, from the last pass
}

// result is one provider network's outcome on this node.
type result struct {
	want   Want
	reason string // "" when ready
	msg    string
}

// +kubebuilder:rbac:groups=kovn.io,resources=providernetworks,verbs=get;list;watch
// +kubebuilder:rbac:groups=kovn.io,resources=providernetworks/status,verbs=get;patch

// Reconcile implements reconcile.Reconciler.
func (r *Reconciler) Reconcile(ctx context.Context, _ ctrl.Request) (ctrl.Result, error) {
	var list kovnv1.ProviderNetworkList
	if err := r.List(ctx, &list); err != nil {
		return ctrl.Result{}, err
	}
	want := Desired(list.Items, r.NodeName)
	have, err := Bridges(ctx, r.OVS)
	if err != nil {
		return ctrl.Result{}, err
	}
	owned := owners(have)
	byProvider := map[string]*Bridge{}
	for i := range have {
		b := &have[i]
		if w, ok := wanted(want, b.Provider); ok && w.NIC == b.NIC {
			byProvider[b.Provider] = b
			continue
		}
		// Not wanted any more, or wanted on another NIC: give this NIC back first.
		if err := r.detach(ctx, *b); err != nil {
			return ctrl.Result{}, fmt.Errorf("detaching provider %s: %w", b.Provider, err)
		}
	}
	dp, err := DatapathType(ctx, r.OVS, r.Integration)
	if err != nil {
		return ctrl.Result{}, err
	}
	var ready []Want
	results := map[string]result{}
	for _, w := range want {
		res := r.attach(ctx, w, byProvider[w.Provider], dp)
		results[w.Provider] = res
		if res.reason == "" {
			ready = append(ready, w)
		}
	}
	if err := SetMappings(ctx, r.OVS, ready, append(owned, providers(want)...)); err != nil {
		return ctrl.Result{}, fmt.Errorf("setting %s: %w", BridgeMappingsKey, err)
	}
	r.mu.Lock()
	r.outcome = results
	r.mu.Unlock()
	if err := r.writeStatus(ctx, list.Items, results); err != nil {
		return ctrl.Result{}, err
	}
	if len(ready) < len(want) {
		return ctrl.Result{RequeueAfter: 10 * time.Second}, nil // a NIC may appear (renamed, hot-plugged)
	}
	return ctrl.Result{RequeueAfter: time.Minute}, nil
}

// attach makes sure w's NIC sits in its bridge with its addresses and routes on the bridge.
func (r *Reconciler) attach(ctx context.Context, w Want, br *Bridge, datapathType string) result {
	res := result{want: w}
	nic, err := netlink.LinkByName(w.NIC)
	if err != nil {
		var nf netlink.LinkNotFoundError
		if errors.As(err, &nf) {
			res.reason, res.msg = kovnv1.ReasonInterfaceNotFound, fmt.Sprintf("interface %s not found on node %s", w.NIC, r.NodeName)
		} else {
			res.reason, res.msg = kovnv1.ReasonBridgeFailed, fmt.Sprintf("looking up interface %s: %v", w.NIC, err)
		}
		return res
	}
	if br == nil {
		cfg, err := ReadNICConfig(nic)
		if err == nil {
			err = CreateBridge(ctx, r.OVS, w.Provider, w.NIC, nic.Attrs().HardwareAddr.String(), datapathType, cfg)
		}
		if err != nil {
			res.reason, res.msg = kovnv1.ReasonBridgeFailed, fmt.Sprintf("creating bridge %s with %s: %v", kovnv1.BridgeName(w.Provider), w.NIC, err)
			return res
		}
		// vswitchd, taking the NIC, writes the interface flags it cached back (promiscuous
		// mode on): let it finish before MoveConfig turns the NIC's ARP off, or that write
		// could turn it on again (the give-back's race, the other way round).
		if err := ovn.AwaitVswitchd(ctx, r.OVS, VswitchdTimeout); err != nil {
			log.FromContext(ctx).Info("ovs-vswitchd has not confirmed the new bridge", "bridge", kovnv1.BridgeName(w.Provider), "error", err.Error())
		}
		br = &Bridge{Provider: w.Provider, Name: kovnv1.BridgeName(w.Provider), NIC: w.NIC, Config: cfg}
		log.FromContext(ctx).Info("moved a NIC into its provider bridge", "provider", w.Provider, "nic", w.NIC,
			"addresses", cfg.Addrs, "routes", len(cfg.Routes))
	}
	if err := r.moveToBridge(ctx, br, nic, datapathType == "netdev"); err != nil {
		res.reason, res.msg = kovnv1.ReasonBridgeFailed, err.Error()
	}
	return res
}

// moveToBridge waits for the bridge's kernel interface and moves the NIC's configuration on it.
func (r *Reconciler) moveToBridge(ctx context.Context, br *Bridge, nic netlink.Link, userspace bool) error {
	link, err := hostnet.WaitLink(ctx, br.Name, 10*time.Second)
	if err != nil {
		return err
	}
	if mtu := nic.Attrs().MTU; link.Attrs().MTU != mtu {
		if err := netlink.LinkSetMTU(link, mtu); err != nil {
			return fmt.Errorf("setting %s's MTU to %s's %d: %w", br.Name, br.NIC, mtu, err)
		}
	}
	if userspace {
		// The userspace datapath does not fill in offloaded checksums of kernel frames.
		for _, ifName := range []string{br.Name, br.NIC} {
			if err := hostnet.SetTxChecksum(ifName, false); err != nil {
				return err
			}
		}
	}
	if err := MoveConfig(br.Config, nic, link, userspace); err != nil {
		return fmt.Errorf("moving %s's configuration to %s: %w", br.NIC, br.Name, err)
	}
	return nil
}

// detach gives the NIC its recorded configuration back and deletes the bridge.
func (r *Reconciler) detach(ctx context.Context, b Bridge) error {
	nicGone, err := GiveBack(ctx, r.OVS, b)
	if err != nil {
		return err
	}
	if nicGone {
		log.FromContext(ctx).Info("provider NIC is gone; deleted its bridge anyway", "bridge", b.Name, "nic", b.NIC)
		return nil
	}
	log.FromContext(ctx).Info("gave a NIC back its configuration and removed its provider bridge", "provider", b.Provider,
		"nic", b.NIC, "addresses", b.Config.Addrs, "routes", len(b.Config.Routes))
	return nil
}

// GiveBack puts a provider bridge's NIC back as it was (its recorded addresses and routes)
// and then deletes the bridge: the NIC holds everything before the bridge's copies go, and the
// record goes with the bridge only once it has been used. A NIC that no longer exists has
// nothing to get back (nicGone); its bridge is deleted anyway. Any other failure to look the
// NIC up keeps the bridge, so a later call still finds the record.
func GiveBack(ctx context.Context, c libovsdb.Client, b Bridge) (nicGone bool, err error) {
	nic, err := netlink.LinkByName(b.NIC)
	var notFound netlink.LinkNotFoundError
	switch {
	case err == nil:
		if err := RestoreConfig(b.Config, nic); err != nil {
			return false, fmt.Errorf("giving %s back its configuration: %w", b.NIC, err)
		}
	case errors.As(err, &notFound):
		nicGone = true
	default:
		return false, fmt.Errorf("looking up provider NIC %s: %w", b.NIC, err)
	}
	if err := DeleteBridge(ctx, c, b.Name); err != nil {
		return nicGone, fmt.Errorf("deleting bridge %s: %w", b.Name, err)
	}
	if !nicGone {
		// ovs-vswitchd, letting go of the NIC, writes back the interface flags it had cached
		// (promiscuous mode off), NOARP included when its cache predates RestoreConfig's ARP
		// on: the NIC then answers neither ARP nor neighbour solicitations (the lab saw eth1
		// NOARP after a give-back in 2 runs of 4). Once vswitchd has applied the deletion,
		// the NIC gets its own answering back a second time.
		if err := ovn.AwaitVswitchd(ctx, c, VswitchdTimeout); err != nil {
			log.FromContext(ctx).Info("ovs-vswitchd has not confirmed the bridge's deletion; restoring the NIC anyway", "nic", b.NIC, "error", err.Error())
		}
		if err := RestoreConfig(b.Config, nic); err != nil {
			return false, fmt.Errorf("giving %s back its configuration after its bridge went: %w", b.NIC, err)
		}
	}
	if !nicGone && len(b.Config.Addrs) > 0 {
		// The addresses answer from the NIC itself again: announce them from there (a
		// gratuitous ARP, an unsolicited NA), so that the physical switch learns the MAC on
		// this port and neighbours refresh, instead of waiting for this node to send first
		// (CI saw a node unanswered for 5 s and more right after the give-back).
		if err := hostnet.AnnounceHere(log.FromContext(ctx), b.NIC, nic.Attrs().HardwareAddr, b.Config.Addrs); err != nil {
			log.FromContext(ctx).Info("announcing the NIC's addresses failed", "nic", b.NIC, "error", err.Error())
		}
	}
	return nicGone, nil
}

// +kubebuilder:rbac:groups=kovn.io,resources=vlans,verbs=get;list;watch

// VlanReady says whether this node can give a pod a port on an underlay subnet of the Vlan
// named vlan: its provider network must be set up here. The CNI asks before plumbing a pod, so
// a pod on a node whose NIC is missing fails with the reason instead of starting cut off.
func (r *Reconciler) VlanReady(ctx context.Context, vlan string) error {
	var v kovnv1.Vlan
	if err := r.Get(ctx, types.NamespacedName{Name: vlan}, &v); err != nil {
		return fmt.Errorf("vlan %s: %w", vlan, err)
	}
	r.mu.Lock()
	res, ok := r.outcome[v.Spec.Provider]
	r.mu.Unlock()
	switch {
	case !ok:
		return fmt.Errorf("provider network %s (vlan %s) is not set up on node %s", v.Spec.Provider, vlan, r.NodeName)
	case res.reason != "":
		// A definite failure (no such NIC, OVS refusing the bridge): said at once, not after the
		// CNI's timeout; the runtime retries the sandbox and succeeds once the node is fixed.
		return fmt.Errorf("%w: provider network %s (vlan %s) is not ready on node %s: %s", hostnet.ErrInvalidConfig, v.Spec.Provider, vlan, r.NodeName, res.msg)
	}
	return nil
}

func wanted(want []Want, provider string) (Want, bool) {
	for _, w := range want {
		if w.Provider == provider {
			return w, true
		}
	}
	return Want{}, false
}

func providers(want []Want) []string {
	out := make([]string, 0, len(want))
	for _, w := range want {
		out = append(out, w.Provider)
	}
	return out
}

// SetupWithManager: any ProviderNetwork change syncs this node.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	key := reconcile.Request{NamespacedName: types.NamespacedName{Name: r.NodeName}}
	toKey := handler.EnqueueRequestsFromMapFunc(func(context.Context, client.Object) []reconcile.Request {
		return []reconcile.Request{key}
	})
	return ctrl.NewControllerManagedBy(mgr).Named("underlay").Watches(&kovnv1.ProviderNetwork{}, toKey).
		Complete(r)
}
