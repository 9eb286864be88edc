package cluster

import (
	"context"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	kovnv1 "github.com/kovn/kovn/api/v1alpha1"
	"github.com/kovn/kovn/pkg/annotation"
	"github.com/kovn/kovn/pkg/cluster/topology"
)

// RemoteNamespace is a namespace another cluster of the clusterset publishes for policies.
type RemoteNamespace struct {
	Cluster, Name string
	// AZ is the cluster's availability zone: its pods' addresses count only inside the
	// prefixes that AZ advertises.
	AZ     string
	Labels map[string]string
}

// RemotePod is a pod another cluster publishes: its labels and the addresses its kovn gave it.
type RemotePod struct {
	Name   string
	Labels map[string]string
	IPs    []netip.Addr
}

// ClustersetPeers are the pods the other clusters of the clusterset publish for policies
// (pkg/interconnect/mcs keeps them from the clusterset store). While the store is unreachable
// it answers with the last rows it read, so policies keep admitting what they admitted.
type ClustersetPeers interface {
	// Ready says whether the view means something: it was read from the store once, or the
	// cluster is in no clusterset. Until then a policy with clusterset-wide peers is left as
	// programmed (a new leader must not drop every remote and local peer while it connects).
	Ready() bool
	// Local is this cluster's id in the clusterset, "" while it is in none.
	Local() string
	// Clusters are the ids of the clusters registered in the set, this one's too.
	Clusters() []string
	// Namespaces are the namespaces the other clusters publish.
	Namespaces() []RemoteNamespace
	// Pods are the pods cluster publishes in namespace.
	Pods(cluster, namespace string) []RemotePod
	// Subscribe has f called with a namespace whenever another cluster's rows of it change
	// (and with "" when the whole view may have changed: a new connection, a cluster gone).
	Subscribe(f func(namespace string))
}

// clustersetWide says whether a namespace selector names annotation.ClusterLabel: such a
// selector is evaluated over every cluster's namespaces.
func clustersetWide(sel *metav1.LabelSelector) bool {
	if sel == nil {
		return false
	}
	if _, ok := sel.MatchLabels[annotation.ClusterLabel]; ok {
		return true
	}
	for _, e := range sel.MatchExpressions {
		if e.Key == annotation.ClusterLabel {
			return true
		}
	}
	return false
}

// withCluster is a namespace's labels as a clusterset-wide selector sees them: its own, with
// annotation.ClusterLabel set to its cluster (whatever the object carries).
func withCluster(lbls map[string]string, cluster string) labels.Set {
	out := maps.Clone(lbls)
	if out == nil {
		out = map[string]string{}
	}
	delete(out, annotation.ClusterLabel)
	if cluster != "" {
		out[annotation.ClusterLabel] = cluster
	}
	return out
}

// remoteTrust is what a remote pod's addresses must pass: inside the prefixes its AZ advertises
// (the InterConnect's status) and outside every local subnet and the join subnet, so a cluster
// can publish neither another cluster's addresses nor this cluster's own.
type remoteTrust struct {
	advertised map[string][]netip.Prefix // AZ -> prefixes
	local      []netip.Prefix
}

// interConnectName is the one InterConnect (pkg/interconnect.Name, which imports this package).
const interConnectName = "default"

// remoteTrustFor reads the peers' advertised prefixes and this cluster's subnets.
func remoteTrustFor(ctx context.Context, r client.Reader, st *State) (remoteTrust, error) {
	t := remoteTrust{advertised: map[string][]netip.Prefix{}}
	var ic kovnv1.InterConnect
	if err := r.Get(ctx, types.NamespacedName{Name: interConnectName}, &ic); client.IgnoreNotFound(err) != nil {
		return t, err
	}
	for _, p := range ic.Status.Peers {
		for _, route := range p.Routes {
			if pfx, err := netip.ParsePrefix(route); err == nil {
				t.advertised[p.AZ] = append(t.advertised[p.AZ], pfx.Masked())
			}
		}
	}
	if st != nil {
		for _, sn := range st.Subnets() {
			t.local = append(t.local, sn.CIDRs...)
		}
		if join := st.Join(); join != nil {
			t.local = append(t.local, join.CIDRs...)
		}
	}
	return t, nil
}

// admits says whether a remote pod of az may be matched at address a.
func (t remoteTrust) admits(az string, a netip.Addr) bool {
	for _, p := range t.local {
		if p.Contains(a) {
			return false
		}
	}
	for _, p := range t.advertised[az] {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// podsInClusterset returns the pods podSel selects in the namespaces of every cluster that
// nsSel (clusterset-wide) selects: this cluster's addressed pods as podsIn finds them and, for
// a peer (not withPort: a policy's own pods are always this cluster's), the other clusters'
// published pods at the addresses trust admits. Remote pods have no named ports (the store
// carries none).
func podsInClusterset(ctx context.Context, r client.Reader, peers ClustersetPeers, trust remoteTrust, nsSel, podSel labels.Selector, withPort bool) ([]topology.PolicyPodIn, error) {
	local := ""
	if peers != nil {
		local = peers.Local()
	}
	var list corev1.NamespaceList
	if err := r.List(ctx, &list); err != nil {
		return nil, err
	}
	var names []string
	for _, n := range list.Items {
		if nsSel.Matches(withCluster(n.Labels, local)) {
			names = append(names, n.Name)
		}
	}
	var out []topology.PolicyPodIn
	if len(names) > 0 {
		pods, err := podsIn(ctx, r, names, podSel, withPort)
		if err != nil {
			return nil, err
		}
		out = pods
	}
	if withPort || local == "" {
		return out, nil
	}
	for _, ns := range peers.Namespaces() {
		if ns.Cluster == local || !nsSel.Matches(withCluster(ns.Labels, ns.Cluster)) {
			continue
		}
		for _, p := range peers.Pods(ns.Cluster, ns.Name) {
			if !podSel.Matches(labels.Set(p.Labels)) {
				continue
			}
			var ips []netip.Addr
			for _, a := range p.IPs {
				if trust.admits(ns.AZ, a) {
					ips = append(ips, a)
				}
			}
			if len(ips) > 0 {
				out = append(out, topology.PolicyPodIn{IPs: ips})
			}
		}
	}
	return out, nil
}

// clustersetPeerWarnings are what a clusterset-wide namespace selector names that does not
// exist: clusters not in the set (cluster.clusterset.k8s.io = or in), and namespaces named
// by kubernetes.io/metadata.name that a named cluster does not publish. Such a peer selects
// nothing there (as a selector naming a namespace not created yet), and the policy says why.
func clustersetPeerWarnings(sel *metav1.LabelSelector, peers ClustersetPeers) []string {
	parsed, err := metav1.LabelSelectorAsSelector(sel)
	if err != nil {
		return nil
	}
	reqs, _ := parsed.Requirements()
	clusters, namespaces := namedValues(reqs, annotation.ClusterLabel), namedValues(reqs, corev1.LabelMetadataName)
	if peers == nil || peers.Local() == "" {
		return []string{"a namespace selector names " + annotation.ClusterLabel + " but this cluster is in no clusterset: it selects no other cluster's pods"}
	}
	known := peers.Clusters()
	var out []string
	for _, c := range clusters {
		if !slices.Contains(known, c) {
			out = append(out, fmt.Sprintf("cluster %q is not in the clusterset (registered: %s)", c, strings.Join(known, ", ")))
		}
	}
	if len(namespaces) == 0 {
		return out
	}
	if clusters == nil {
		clusters = known
	}
	published := map[string]bool{}
	for _, ns := range peers.Namespaces() {
		published[ns.Cluster+"/"+ns.Name] = true
	}
	for _, c := range clusters {
		if c == peers.Local() || !slices.Contains(known, c) {
			continue
		}
		for _, ns := range namespaces {
			if !published[c+"/"+ns] {
				out = append(out, fmt.Sprintf("namespace %q of cluster %q is not published for policies (its namespace there needs the label %s=%s)",
					ns, c, annotation.PublishPeersLabel, annotation.PublishPeersValue))
			}
		}
	}
	return out
}

// namedValues are the values a requirement on key pins (= or in), sorted; nil when none does.
func namedValues(reqs labels.Requirements, key string) []string {
	for _, r := range reqs {
		if r.Key() != key {
			continue
		}
		switch r.Operator() {
		case selection.Equals, selection.DoubleEquals, selection.In:
			return slices.Sorted(maps.Keys(r.Values()))
		}
	}
	return nil
}

// peersSource feeds a controller the requests toRequests gives whenever the other clusters'
// published rows change. Changes coalesce: one worker maps them, however many rows changed
// (a reconnection brings every row at once).
func peersSource(peers ClustersetPeers, toRequests func(ctx context.Context) []reconcile.Request) source.Source {
	return source.Func(func(ctx context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request]) error {
		kick := make(chan struct{}, 1)
		peers.Subscribe(func(string) {
			select {
			case kick <- struct{}{}:
			default: // one mapping is pending already: it will see this change too
			}
		})
		go func() {
			for {
				select {
				case <-ctx.Done():
					return
				case <-kick:
				}
				for _, req := range toRequests(ctx) {
					q.Add(req)
				}
			}
		}()
		return nil
	})
}
