package mcs

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	mcscrd "sigs.k8s.io/mcs-api/config/crd"
	mcsv1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
	"sigs.k8s.io/yaml"

	aboutv1 "github.com/kovn/kovn/api/about/v1beta1"
	kovnv1 "github.com/kovn/kovn/api/v1alpha1"
)

// CRDs are mcs-api's own ServiceExport and ServiceImport CRDs, as the module ships them
// (v1beta1 stored, v1alpha1 served: CoreDNS's multicluster option reads v1alpha1).
func CRDs() ([]*apiextv1.CustomResourceDefinition, error) {
	var out []*apiextv1.CustomResourceDefinition
	for _, b := range [][]byte{mcscrd.ServiceExportCRD, mcscrd.ServiceImportCRD} {
		crd := &apiextv1.CustomResourceDefinition{}
		if err := yaml.Unmarshal(b, crd); err != nil {
			return nil, fmt.Errorf("mcs-api CRD: %w", err)
		}
		out = append(out, crd)
	}
	return out, nil
}

// Setup registers the membership, export, policy-peer publishing and import reconcilers
// with mgr; set is shared.
func Setup(mgr ctrl.Manager, set *Clusterset) error {
	c := mgr.GetClient()
	byName := func(ns, name string) []reconcile.Request {
		return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: ns, Name: name}}}
	}
	err := ctrl.NewControllerManagedBy(mgr).Named("mcs-membership").For(&kovnv1.InterConnect{}).
		Watches(&aboutv1.ClusterProperty{}, handler.EnqueueRequestsFromMapFunc(func(context.Context, client.Object) []reconcile.Request {
			return byName("", "default")
		})).
		Complete(&MembershipReconciler{Client: c, Set: set})
	if err != nil {
		return err
	}
	// An export follows its Service and the Service's own EndpointSlices.
	err = ctrl.NewControllerManagedBy(mgr).Named("mcs-export").For(&mcsv1.ServiceExport{}).
		Watches(&corev1.Service{}, handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
			return byName(o.GetNamespace(), o.GetName())
		})).
		Watches(&discoveryv1.EndpointSlice{}, handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
			name, ok := o.GetLabels()[discoveryv1.LabelServiceName]
			if _, imported := o.GetLabels()[mcsv1.LabelServiceName]; !ok || imported {
				return nil
			}
			return byName(o.GetNamespace(), name)
		})).
		WatchesRawSource(set.Source()).
		Complete(&ExportReconciler{Client: c, Set: set, Recorder: mgr.GetEventRecorderFor("kovn-mcs"), Tamper: set.Tamper})
	if err != nil {
		return err
	}
	if err := (&PublishReconciler{Client: c, Set: set}).SetupWithManager(mgr); err != nil {
		return err
	}
	// An import follows the store, what it derived (repaired when changed by hand) and
	// namespaces (an import waits for its namespace).
	return ctrl.NewControllerManagedBy(mgr).Named("mcs-import").For(&mcsv1.ServiceImport{}).
		Watches(&corev1.Service{}, handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
			if name, ok := o.GetLabels()[LabelDerivedFor]; ok {
				return byName(o.GetNamespace(), name)
			}
			return nil
		})).
		Watches(&discoveryv1.EndpointSlice{}, handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
			if o.GetLabels()[discoveryv1.LabelManagedBy] == ManagedBy {
				return byName(o.GetNamespace(), o.GetLabels()[mcsv1.LabelServiceName])
			}
			return nil
		})).
		Watches(&corev1.Namespace{}, handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
			store, _ := set.Store()
			if store == nil {
				return nil
			}
			exports, _ := store.AllExports(ctx)
			var out []reconcile.Request
			for _, e := range exports {
				if e.Namespace == o.GetName() {
					out = append(out, byName(e.Namespace, e.Name)...)
				}
			}
			return out
		})).
		WatchesRawSource(set.Source()).
		Complete(&ImportReconciler{Client: c, Set: set})
}
