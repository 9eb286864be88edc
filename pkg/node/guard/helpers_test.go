package guard

import (
	"testing"

	libovsdb "github.com/ovn-org/libovsdb/client"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	kovnv1 "github.com/kovn/kovn/api/v1alpha1"
	"github.com/kovn/kovn/pkg/cni"
	"github.com/kovn/kovn/pkg/ovn/ovntest"
)

// networksClient is a fake API client holding objs and the default subnet.
func networksClient(t *testing.T, objs ...client.Object) client.Client {
	t.Helper()
	s := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(s)
	_ = kovnv1.AddToScheme(s)
	objs = append(objs, &kovnv1.Subnet{ObjectMeta: metav1.ObjectMeta{Name: "ovn-default"},
		Spec: kovnv1.SubnetSpec{CIDRBlock: "10.16.0.0/16,fd00:10:16::/64"}})
	return fake.NewClientBuilder().WithScheme(s).WithObjects(objs...).Build()
}

// mirrorOVS is an in-memory Open_vSwitch database with br-int.
func mirrorOVS(t *testing.T) libovsdb.Client {
	c, _ := ovntest.ServeOVS(t, cni.DefaultBridge, nil)
	return c
}
