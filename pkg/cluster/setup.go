package cluster

import (
	"context"
	"fmt"
	"io/fs"
	"net/netip"
	"slices"
	"sort"
	"strings"
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

	kovnv1 "github.com/kovn/kovn/api/v1alpha1"
	"github.com/kovn/kovn/deploy/crds"
	"github.com/kovn/kovn/pkg/annotation"
	"github.com/kovn/kovn/pkg/ipam"
	"github.com/kovn/kovn/pkg/netattach"
)

// +kubebuilder:rbac:groups=apiextensions.k8s.io,resources=customresourcedefinitions,verbs=get
// +kubebuilder:rbac:groups=coordination.k8s.io,resources=leases,verbs=get;list;watch;create;update;patch
// +kubebuilder:rbac:groups=kovn.io,resources=vpcs;subnets,verbs=get;list;watch;create

// CRDs are the CRD manifests of deploy/crds: kovn's own, and those of the APIs it implements
// (mcs-api's, KEP-2149's ClusterProperty, NPWG's NetworkAttachmentDefinition, network-policy-api's
// ClusterNetworkPolicy).
func CRDs() ([]*apiextv1.CustomResourceDefinition, error) {
	files, err := fs.Glob(crds.FS, "*.yaml")
	if err != nil {
		return nil, err
	}
	var out []*apiextv1.CustomResourceDefinition
	for _, f := range files {
		b, _ := crds.FS.ReadFile(f)
		var crd apiextv1.CustomResourceDefinition
		if err := yaml.Unmarshal(b, &crd); err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		out = append(out, &crd)
	}
	return out, nil
}

// RequireCRDs waits until the API serves every CRD of deploy/crds with each version this build
// uses. kovn-controller does not install them: the chart does (or `kubectl apply -f
// deploy/crds`), so a compromised controller cannot rewrite any API's schema. On timeout the
// error names each missing CRD or version and the fix.
func RequireCRDs(ctx context.Context, c client.Client) error {
	want, err := CRDs()
	if err != nil {
		return err
	}
	for {
		var missing []string
		for _, crd := range want {
			if problem := crdProblem(ctx, c, crd); problem != "" {
				missing = append(missing, problem)
			}
		}
		if len(missing) == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: install kovn's CRDs (the chart does; or kubectl apply --server-side -f deploy/crds/)",
				strings.Join(missing, "; "))
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// crdProblem is why the API does not serve want as this build needs it, "" when it does.
func crdProblem(ctx context.Context, c client.Client, want *apiextv1.CustomResourceDefinition) string {
	var cur apiextv1.CustomResourceDefinition
	if err := c.Get(ctx, types.NamespacedName{Name: want.Name}, &cur); err != nil {
		if apierrors.IsNotFound(err) {
			return "CRD " + want.Name + " is not installed"
		}
		return fmt.Sprintf("CRD %s: %v", want.Name, err)
	}
	established := slices.ContainsFunc(cur.Status.Conditions, func(c apiextv1.CustomResourceDefinitionCondition) bool {
		return c.Type == apiextv1.Established && c.Status == apiextv1.ConditionTrue
	})
	if !established {
		return "CRD " + want.Name + " is not established"
	}
	for _, v := range want.Spec.Versions {
		if v.Served && !slices.ContainsFunc(cur.Spec.Versions, func(c apiextv1.CustomResourceDefinitionVersion) bool {
			return c.Name == v.Name && c.Served
		}) {
			return fmt.Sprintf("CRD %s does not serve version %s (an older kovn's CRDs?)", want.Name, v.Name)
		}
	}
	return ""
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
		case ip.Spec.PodName == "" && ip.Spec.Masquerade:
			owner = nodeMasqOwner(ip.Spec.NodeName)
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
// health may be nil (centralized subnet gateways then fail over on Node readiness only), and
// peers (policies then select in this cluster only).
func Setup(mgr ctrl.Manager, st *State, nb libovsdb.Client, health *GatewayHealth, peers ClustersetPeers, clusters ClusterHealth) error {
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
		&AttachmentReconciler{Client: c, State: st, Recorder: rec, Delegates: netattach.AllowingHostInterfaces(st.Opts.AttachmentHostInterfaces...)},
		&PodPortReconciler{Client: c, State: st, NB: nb, Recorder: rec},
		&StatefulSetReconciler{Client: c, State: st},
		&ServiceReconciler{Client: c, State: st, NB: nb, Recorder: rec, ExternalIPCIDRs: st.Opts.ExternalIPCIDRs, Clusters: clusters},
		&NetworkPolicyReconciler{Client: c, State: st, NB: nb, Recorder: rec, Peers: peers},
		&ClusterNetworkPolicyReconciler{Client: c, State: st, NB: nb, Recorder: rec, Peers: peers},
		&MultiNetworkPolicyReconciler{Client: c, State: st, NB: nb, Recorder: rec, Delegates: netattach.AllowingHostInterfaces(st.Opts.AttachmentHostInterfaces...)},
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
