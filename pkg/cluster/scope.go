package cluster

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kovnv1 "github.com/kovn/kovn/api/v1alpha1"
	"github.com/kovn/kovn/pkg/annotation"
)

// ReasonNetworkRequestDenied: a pod asks (by annotation) for a network its namespace may not
// use: another namespace's subnet, the join network, a private, underlay or custom-VPC subnet
// not opened to it, an IP pool that does not list it, or a MAC kovn keeps for its routers.
// The pod gets no network and nothing else changes.
const ReasonNetworkRequestDenied = "NetworkRequestDenied"

// errOutOfScope marks a request refused for its scope (not for its syntax).
var errOutOfScope = errors.New("out of scope")

func outOfScope(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{errOutOfScope}, args...)...)
}

// Pod annotations are written by whoever may edit pods in the namespace: a tenant. What they
// name is checked against what the namespace is given, the way a Subnet's or Vpc's namespaces
// list reads to an admin.

// subnetScope says whether a pod of namespace ns may name subnet sn in its logical_switch or
// ip_pool annotation. vpc is sn's Vpc when it is not the default one (nil otherwise or when
// it does not exist).
//
// Allowed: a subnet that lists ns, or an unbound, non-private overlay subnet of the default
// VPC, or an unbound subnet of a Vpc that lists ns. Never the join subnet (the nodes' network:
// every policy and private subnet admits its node's address) nor an attachment's subnet.
func subnetScope(ns string, sn *kovnv1.Subnet, vpc *kovnv1.Vpc, o Options) error {
	switch {
	case sn.Name == o.JoinSubnet:
		return outOfScope("subnet %q is the nodes' join network; no pod may take an address on it", sn.Name)
	case sn.Spec.Provider != "":
		return outOfScope("subnet %q is the attachment network of %s, not a pod's eth0 network", sn.Name, sn.Spec.Provider)
	case slices.Contains(sn.Spec.Namespaces, ns):
		return nil
	case len(sn.Spec.Namespaces) > 0:
		return outOfScope("subnet %q is bound to namespaces %v; %s is not one of them", sn.Name, sn.Spec.Namespaces, ns)
	case sn.Spec.Private:
		return outOfScope("subnet %q is private: only namespaces in its spec.namespaces may use it", sn.Name)
	case sn.Spec.Vlan != "":
		return outOfScope("subnet %q is an underlay network (vlan %s): only namespaces in its spec.namespaces may use it", sn.Name, sn.Spec.Vlan)
	case sn.Spec.Vpc != "" && sn.Spec.Vpc != o.DefaultVpc && (vpc == nil || !slices.Contains(vpc.Spec.Namespaces, ns)):
		return outOfScope("subnet %q belongs to Vpc %q, which does not list namespace %s", sn.Name, sn.Spec.Vpc, ns)
	}
	return nil
}

// poolScope says whether a pod of namespace ns may take addresses from pool p: an empty
// namespaces list leaves the pool open (as documented), otherwise it must list ns.
func poolScope(ns string, p *kovnv1.IPPool) error {
	if len(p.Spec.Namespaces) == 0 || slices.Contains(p.Spec.Namespaces, ns) {
		return nil
	}
	return outOfScope("IP pool %q is for namespaces %v; %s is not one of them", p.Name, p.Spec.Namespaces, ns)
}

// requestedMAC parses a static MAC a pod asks for; a reserved one is out of its scope.
func requestedMAC(s string) (string, error) {
	mac, err := annotation.ParseRequestedMAC(s)
	if errors.Is(err, annotation.ErrReservedMAC) {
		return "", fmt.Errorf("%w: %w", errOutOfScope, err)
	}
	return mac, err
}

// checkSubnetScope reads the subnet (and its Vpc) a pod names and applies subnetScope.
func checkSubnetScope(ctx context.Context, c client.Reader, ns, name string, o Options) error {
	var sn kovnv1.Subnet
	if err := c.Get(ctx, types.NamespacedName{Name: name}, &sn); err != nil {
		return fmt.Errorf("subnet %q: %w", name, err)
	}
	var vpc *kovnv1.Vpc
	if v := sn.Spec.Vpc; v != "" && v != o.DefaultVpc {
		var obj kovnv1.Vpc
		if err := c.Get(ctx, types.NamespacedName{Name: v}, &obj); err == nil {
			vpc = &obj
		}
	}
	return subnetScope(ns, &sn, vpc, o)
}
