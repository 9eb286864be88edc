package kovnctl

import (
	"context"
	"fmt"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	mcsv1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	kovnv1 "github.com/kovn/kovn/api/v1alpha1"
)

// NewClient is a client for the kinds kubectl-kovn reads.
func NewClient(cfg *rest.Config) (client.Client, error) {
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, kovnv1.AddToScheme, mcsv1.Install} {
		if err := add(scheme); err != nil {
			return nil, err
		}
	}
	return client.New(cfg, client.Options{Scheme: scheme})
}

// Collect lists what Build reads. Kinds whose CRDs are not installed (MCS before kovn-controller
// ran) read as none; any other error is returned.
func Collect(ctx context.Context, c client.Reader) (Inputs, error) {
	in := Inputs{Now: time.Now()}
	var lease coordinationv1.Lease
	switch err := c.Get(ctx, client.ObjectKey{Namespace: "kube-system", Name: "kovn-controller"}, &lease); {
	case err == nil:
		in.Lease = &lease
	case !apierrors.IsNotFound(err):
		return in, fmt.Errorf("reading the leader lease: %w", err)
	}
	var ic kovnv1.InterConnect
	switch err := c.Get(ctx, client.ObjectKey{Name: "default"}, &ic); {
	case err == nil:
		in.InterConnect = &ic
	case !apierrors.IsNotFound(err) && !meta.IsNoMatchError(err):
		return in, fmt.Errorf("reading the InterConnect: %w", err)
	}
	var nodes corev1.NodeList
	var subnets kovnv1.SubnetList
	var exports mcsv1.ServiceExportList
	var imports mcsv1.ServiceImportList
	var peers kovnv1.BgpPeerList
	var foreign kovnv1.ForeignAZList
	for _, l := range []client.ObjectList{&nodes, &subnets, &exports, &imports, &peers, &foreign} {
		if err := c.List(ctx, l); err != nil && !meta.IsNoMatchError(err) {
			return in, fmt.Errorf("listing %T: %w", l, err)
		}
	}
	in.Nodes, in.Subnets, in.Exports, in.Imports, in.BgpPeers = nodes.Items, subnets.Items, exports.Items, imports.Items, peers.Items
	in.ForeignAZs = foreign.Items
	return in, nil
}
