package cluster

import (
	"context"
	"fmt"
	"io/fs"
	"net/netip"
	"slices"
	"sort"
	"time"

	libovsdb "github.com/ovn-org/libovsdb/client"
	corev1 "k8s.io/api/core/v1"
	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	nadv1 "github.com/kovn/kovn/api/nad/v1"
	kovnv1 "github.com/kovn/kovn/api/v1alpha1"
	"github.com/kovn/kovn/deploy/crds"
	"github.com/kovn/kovn/pkg/annotation"
	"github.com/kovn/kovn/pkg/ipam"
	"github.com/kovn/kovn/pkg/netattach"
)

// +kubebuilder:rbac:groups=apiextensions.k8s.io,resources=customresourcedefinitions,verbs=get;create;update
// +kubebuilder:rbac:groups=coordination.k8s.io,resources=leases,verbs=get;list;watch;create;update;patch
// +kubebuilder:rbac:groups=kovn.io,resources=vpcs;subnets,verbs=get;list;watch;create

// InstallCRDs creates or updates kovn's CRDs from the embedded manifests and waits until the
// API serves them.
func InstallCRDs(ctx context.Context, c client.Client) error {
	files, err := fs.Glob(crds.FS, "*.yaml")
	if err != nil {
		return err
	}
	for _, f := range files {
		b, _ := crds.FS.ReadFile(f)
		var want apiextv1.CustomResourceDefinition
		if err := yaml.Unmarshal(b, &want); err != nil {
			return fmt.Errorf("%s: %w", f, err)
		}
		if err := ApplyCRD(ctx, c, &want); err != nil {
			return err
		}
	}
	return nil
}

// ApplyCRD creates want or updates its spec, and waits until the apiserver serves it.
func ApplyCRD(ctx context.Context, c client.Client, want *apiextv1.CustomResourceDefinition) error {
	var cur apiextv1.CustomResourceDefinition
	err := c.Get(ctx, types.NamespacedName{Name: want.Name}, &cur)
	switch {
	case apierrors.IsNotFound(err):
		err = c.Create(ctx, want)
	case err == nil && want.Spec.Group == nadv1.GroupVersion.Group:
		// Multus (or another NPWG implementation) may have installed it: kovn reads only
		// spec.config, which every version of it has, so it is left as it is.
	case err == nil:
		cur.Spec = want.Spec
		err = c.Update(ctx, &cur)
	}
	if err != nil {
		return fmt.Errorf("install CRD %s: %w", want.Name, err)
	}
	return waitEstablished(ctx, c, want.Name)
}

func waitEstablished(ctx context.Context, c client.Client, name string) error {
	for {
		var crd apiextv1.CustomResourceDefinition
		if err := c.Get(ctx, types.NamespacedName{Name: name}, &crd); err == nil {
			for _, cond := range crd.Status.Conditions {
				if cond.Type == apiextv1.Established && cond.Status == apiextv1.ConditionTrue {
					return nil
				}
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("CRD %s not established: %w", name, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// EnsureDefaults creates the default VPC, the default subnet and the join subnet if missing.
// Existing objects are left alone: an operator's edits win.
func EnsureDefaults(ctx context.Context, c client.Client, o Options) error {
	objs := []client.Object{
		&kovnv1.Vpc{ObjectMeta: metav1.ObjectMeta{Name: o.DefaultVpc}},
		&kovnv1.Subnet{ObjectMeta: metav1.ObjectMeta{Name: o.DefaultSubnet},
			Spec: kovnv1.SubnetSpec{Vpc: o.DefaultVpc, CIDRBlock: o.DefaultSubnetCIDR, Default: true, NATOutgoing: o.NodeNATOutgoing}},
		&kovnv1.Subnet{ObjectMeta: metav1.ObjectMeta{Name: o.JoinSubnet},
			Spec: kovnv1.SubnetSpec{Vpc: o.DefaultVpc, CIDRBlock: o.JoinCIDR}},
	}
	for _, obj := range objs {
		if err := c.Create(ctx, obj); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create default %T %s: %w", obj, obj.GetName(), err)
		}
	}
	return nil
}

// Restore rebuilds the IPAM from the API before any reconciler runs, so a restarted controller
// never hands out an address that is in use: valid subnets first (oldest first, as overlap
// resolution does), then pools, then every IP object and node join address.
func Restore(ctx context.Context, c client.Client, st *State) error {
	var subnets kovnv1.SubnetList
	if err := c.List(ctx, &subnets); err != nil {
		return err
	}
	sort.Slice(subnets.Items, func(i, j int) bool { return older(&subnets.Items[i], &subnets.Items[j]) })
	sr := &SubnetReconciler{Client: c, State: st}
	for i := range subnets.Items {
		sn := &subnets.Items[i]
		in, err := sr.resolve(ctx, sn, subnets.Items)
		if err != nil {
			continue // reported by the Subnet reconciler
		}
		if err := st.IPAM.AddOrUpdateSubnet(in.Name, in.CIDRs, in.Gateways, mustExcludes(sn)); err == nil {
			st.setSubnet(in)
		}
	}
	var pools kovnv1.IPPoolList
	if err := c.List(ctx, &pools); err != nil {
		return err
	}
	for _, p := range pools.Items {
		if rs, err := p.Spec.Ranges(); err == nil {
			_ = st.IPAM.AddOrUpdatePool(p.Spec.Subnet, p.Name, ipamRanges(rs))
		}
	}
	var ips kovnv1.IPList
	if err := c.List(ctx, &ips); err != nil {
		return err
	}
	for i := range ips.Items {
		ip := &ips.Items[i]
		a := ipam.Allocation{Subnet: ip.Spec.Subnet, MAC: ip.Spec.MACAddress}
		a.IPs, _ = ip.Spec.Addrs()
		owner := podOwner(ip.Spec.Namespace, ip.Spec.PodName)
		switch {
		case ip.Spec.PodName == "":
			owner = nodeOwner(ip.Spec.NodeName)
		case ip.Spec.Interface != "":
			owner = attachmentOwner(ip.Spec.Namespace, ip.Spec.PodName, ip.Spec.Interface)
		}
		if err := st.IPAM.Restore(owner, a); err != nil {
			ctrl.Log.Info("IP object conflicts with another allocation; not restored", "ip", ip.Name, "err", err)
		}
	}
	if err := restoreFloatingIPs(ctx, c, st); err != nil {
		return err
	}
	if err := restoreEgressIPs(ctx, c, st); err != nil {
		return err
	}
	return restoreNodes(ctx, c, st)
}

// restoreFloatingIPs takes back each FloatingIP's addresses, as its status records them.
func restoreFloatingIPs(ctx context.Context, c client.Client, st *State) error {
	var fips kovnv1.FloatingIPList
	if err := c.List(ctx, &fips); err != nil {
		return err
	}
	for _, f := range fips.Items {
		restoreExternal(st, fipOwner(f.Name), f.Spec.Subnet, f.Status.Addresses)
	}
	return nil
}

// restoreEgressIPs takes back each EgressIP's addresses, as its status records them.
func restoreEgressIPs(ctx context.Context, c client.Client, st *State) error {
	var eips kovnv1.EgressIPList
	if err := c.List(ctx, &eips); err != nil {
		return err
	}
	for _, e := range eips.Items {
		restoreExternal(st, eipOwner(e.Name), e.Spec.Subnet, egressAddrStrings(e.Status.Addresses))
	}
	return nil
}

// restoreExternal gives owner back the addresses of an external subnet its status records.
func restoreExternal(st *State, owner, subnet string, recorded []string) {
	var ips []netip.Addr
	for _, a := range recorded {
		if ip, err := netip.ParseAddr(a); err == nil {
			ips = append(ips, ip)
		}
	}
	if len(ips) == 0 {
		return
	}
	if err := st.IPAM.Restore(owner, ipam.Allocation{Subnet: subnet, IPs: ips}); err != nil {
		ctrl.Log.Info("recorded addresses conflict with another allocation; not restored", "owner", owner, "err", err)
	}
}

func restoreNodes(ctx context.Context, c client.Client, st *State) error {
	var nodes corev1.NodeList
	if err := c.List(ctx, &nodes); err != nil {
		return err
	}
	for _, n := range nodes.Items {
		if _, ok := st.IPAM.Lookup(nodeOwner(n.Name)); ok {
			continue // restored from its IP object
		}
		// Addressed before IP objects recorded nodes: its annotations are all there is.
		ips, err := annotation.ParseAddrs(n.Annotations[annotation.JoinIP])
		if err != nil {
			continue
		}
		a := ipam.Allocation{Subnet: st.Opts.JoinSubnet, IPs: ips, MAC: n.Annotations[annotation.JoinMAC]}
		if err := st.IPAM.Restore(nodeOwner(n.Name), a); err != nil {
			ctrl.Log.Info("node join address conflicts; it will be reallocated", "node", n.Name, "err", err)
		}
	}
	return nil
}

// Setup registers every single-cluster reconciler with the manager.
// health may be nil (centralized subnet gateways then fail over on Node readiness only).
func Setup(mgr ctrl.Manager, st *State, nb libovsdb.Client, health *GatewayHealth) error {
	rec := mgr.GetEventRecorderFor("kovn-controller")
	c := mgr.GetClient()
	// A pod's IP objects (eth0's and its attachments') by pod: the attachment and port
	// reconcilers read them per pod, not per cluster.
	if err := mgr.GetFieldIndexer().IndexField(context.Background(), &kovnv1.IP{}, ipPodKey, ipPodIndex); err != nil {
		return err
	}
	reconcilers := []interface{ SetupWithManager(ctrl.Manager) error }{
		&SubnetReconciler{Client: c, State: st, Recorder: rec, NB: nb, Health: health},
		&VpcReconciler{Client: c, State: st, NB: nb},
		&VlanReconciler{Client: c},
		&IPPoolReconciler{Client: c, State: st},
		&NodeReconciler{Client: c, State: st, NB: nb},
		&PodReconciler{Client: c, State: st, Recorder: rec},
		&AttachmentReconciler{Client: c, State: st, Recorder: rec, Delegates: netattach.DefaultDelegates},
		&PodPortReconciler{Client: c, State: st, NB: nb, Recorder: rec},
		&StatefulSetReconciler{Client: c, State: st},
		&ServiceReconciler{Client: c, State: st, NB: nb, Recorder: rec},
		&NetworkPolicyReconciler{Client: c, State: st, NB: nb, Recorder: rec},
		&FloatingIPReconciler{Client: c, State: st, NB: nb},
		&EgressIPReconciler{Client: c, State: st, NB: nb, Health: health},
	}
	if !st.Opts.AttachmentNetworks {
		// A meta-plugin serves the pods' networks annotation: kovn neither refuses nor
		// allocates for it.
		reconcilers = slices.DeleteFunc(reconcilers, func(r interface{ SetupWithManager(ctrl.Manager) error }) bool {
			_, attach := r.(*AttachmentReconciler)
			return attach
		})
	}
	for _, r := range reconcilers {
		if err := r.SetupWithManager(mgr); err != nil {
			return err
		}
	}
	if health != nil {
		if err := mgr.Add(health); err != nil {
			return err
		}
	}
	return mgr.Add(&OrphanCollector{Cache: c, Live: mgr.GetAPIReader(), State: st, NB: nb, Interval: 10 * time.Minute})
}
