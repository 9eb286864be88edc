package node

import (
	"context"
	"net/http"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	nadv1 "github.com/kovn/kovn/api/nad/v1"
	kovnv1 "github.com/kovn/kovn/api/v1alpha1"
	"github.com/kovn/kovn/pkg/cni"
	"github.com/kovn/kovn/pkg/node/bootstrap"
	"github.com/kovn/kovn/pkg/ovn/ovntest"
)

// Setup wires every node runnable into a manager that is never started (no API server is
// contacted): no controller name clashes, no registration fails, and a node name is required.
func TestSetupWiresEveryRunnable(t *testing.T) {
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, kovnv1.AddToScheme, nadv1.AddToScheme} {
		if err := add(scheme); err != nil {
			t.Fatal(err)
		}
	}
	ovs, _ := ovntest.ServeOVS(t, cni.DefaultBridge, nil)
	// One manager, with --netdev, which adds the most: controller names are unique per
	// process, so a second Setup would clash with the first.
	mgr, err := ctrl.NewManager(&rest.Config{Host: "https://127.0.0.1:1"}, ctrl.Options{Scheme: scheme, MapperProvider: staticMapper(scheme),
		Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0", Cache: CacheOptions("n1")})
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{Config: bootstrap.Config{NodeName: "", Bridge: cni.DefaultBridge, JoinSubnet: "join", Netdev: true,
		CNISocket: t.TempDir() + "/cni.sock", CNIConfDir: t.TempDir()}, AttachmentNetworks: true}
	deps := Deps{OVS: ovs, Metrics: prometheus.NewRegistry()}
	ctx, cancel := context.WithCancel(context.Background()) // stops the OVS liveness watch
	t.Cleanup(cancel)
	if err := Setup(ctx, mgr, cfg, deps); err == nil {
		t.Error("Setup without a node name succeeded")
	}
	cfg.NodeName = "n1"
	if err := Setup(ctx, mgr, cfg, deps); err != nil {
		t.Fatal(err)
	}
}

// staticMapper maps every type of scheme without asking an API server: the kinds whose objects
// live in namespaces as namespaced, the rest cluster-wide.
func staticMapper(scheme *runtime.Scheme) func(*rest.Config, *http.Client) (meta.RESTMapper, error) {
	namespaced := map[string]bool{"Pod": true, "Service": true, "EndpointSlice": true, "Event": true, "NetworkAttachmentDefinition": true}
	return func(*rest.Config, *http.Client) (meta.RESTMapper, error) {
		m := meta.NewDefaultRESTMapper(nil)
		for gvk := range scheme.AllKnownTypes() {
			scope := meta.RESTScopeRoot
			if namespaced[gvk.Kind] {
				scope = meta.RESTScopeNamespace
			}
			m.Add(gvk, scope)
		}
		return m, nil
	}
}
