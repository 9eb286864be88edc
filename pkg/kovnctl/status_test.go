package kovnctl

import (
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	mcsv1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	kovnv1 "github.com/kovn/kovn/api/v1alpha1"
)

var now = time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)

func before(d time.Duration) metav1.Time { return metav1.NewTime(now.Add(-d)) }

func healthyNode(name string) corev1.Node {
	return corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{
		{Type: corev1.NodeReady, Status: corev1.ConditionTrue},
		{Type: kovnv1.NodeConditionNetworkReady, Status: corev1.ConditionTrue, Reason: kovnv1.ReasonNodeNetworkReady,
			LastHeartbeatTime: before(5 * time.Second), LastTransitionTime: before(time.Hour)}}}}
}

func healthy() Inputs {
	ready := func() []metav1.Condition {
		return []metav1.Condition{{Type: kovnv1.ConditionReady, Status: metav1.ConditionTrue}}
	}
	return Inputs{
		Now: now,
		Lease: &coordinationv1.Lease{Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("cp_1"),
			LeaseDurationSeconds: ptr.To[int32](15), RenewTime: &metav1.MicroTime{Time: now.Add(-2 * time.Second)}}},
		Nodes:   []corev1.Node{healthyNode("n1"), healthyNode("n2")},
		Subnets: []kovnv1.Subnet{{ObjectMeta: metav1.ObjectMeta{Name: "ovn-default"}, Status: kovnv1.SubnetStatus{Conditions: ready()}}},
		InterConnect: &kovnv1.InterConnect{ObjectMeta: metav1.ObjectMeta{Name: "default"}, Status: kovnv1.InterConnectStatus{
			AZName: "az1", Conditions: ready(), Peers: []kovnv1.InterConnectPeer{{AZ: "az2", Gateways: []string{"c2-n1"}, Routes: []string{"10.17.0.0/16"}}}}},
		Exports: []mcsv1.ServiceExport{{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web"}, Status: mcsv1.ServiceExportStatus{
			Conditions: []metav1.Condition{{Type: "Valid", Status: metav1.ConditionTrue}, {Type: "Ready", Status: metav1.ConditionTrue}}}}},
		BgpPeers: []kovnv1.BgpPeer{{ObjectMeta: metav1.ObjectMeta{Name: "tor"}, Status: kovnv1.BgpPeerStatus{
			Nodes: []kovnv1.BgpPeerNodeStatus{{Node: "n1", State: kovnv1.BgpStateEstablished}}}}},
		ForeignAZs: []kovnv1.ForeignAZ{{ObjectMeta: metav1.ObjectMeta{Name: "openstack"}, Spec: kovnv1.ForeignAZSpec{AZ: "openstack"},
			Status: kovnv1.ForeignAZStatus{Learned: []string{"10.250.1.0/24"}, Conditions: append(ready(),
				metav1.Condition{Type: kovnv1.ConditionRoutesAgreed, Status: metav1.ConditionTrue})}}},
	}
}

func TestStatusNamesEachFault(t *testing.T) {
	if r := Build(healthy()); len(r.Problems) != 0 || r.Summary() != "kovn is healthy" {
		t.Fatalf("healthy cluster: %+v", r.Problems)
	}
	for _, tc := range []struct {
		name   string
		break_ func(*Inputs)
		object string
		says   []string
	}{
		{"ovn-controller stopped", func(in *Inputs) {
			c := &in.Nodes[1].Status.Conditions[1]
			c.Status, c.Reason, c.Message = corev1.ConditionFalse, kovnv1.ReasonOVNControllerDown, "ovn-controller is not running"
		}, "node/n2", []string{"ovn-controller is not running", "kovn-ovs pod on n2"}},
		{"kovn-daemon stopped reporting", func(in *Inputs) {
			in.Nodes[0].Status.Conditions[1].LastHeartbeatTime = before(2 * time.Minute)
		}, "node/n1", []string{"stopped reporting 2m0s ago"}},
		{"kovn-daemon never ran", func(in *Inputs) {
			in.Nodes[0].Status.Conditions = in.Nodes[0].Status.Conditions[:1]
		}, "node/n1", []string{"never reported"}},
		{"no leader", func(in *Inputs) { in.Lease.Spec.RenewTime = &metav1.MicroTime{Time: now.Add(-time.Minute)} },
			"kovn-controller", []string{"cp_1 last renewed its lease 1m0s ago"}},
		{"IC database unreachable", func(in *Inputs) {
			in.InterConnect.Status.Conditions = []metav1.Condition{{Type: kovnv1.ConditionReady, Status: metav1.ConditionFalse,
				Reason: "ICDatabaseUnreachable", Message: "IC-SB [tcp:172.30.0.100:6646] not answering"}}
		}, "interconnect/default", []string{"IC-SB [tcp:172.30.0.100:6646] not answering", "spec.icNorthbound"}},
		{"route conflict", func(in *Inputs) {
			in.InterConnect.Status.Conditions = append(in.InterConnect.Status.Conditions, metav1.Condition{Type: "RoutesAccepted",
				Status: metav1.ConditionFalse, Message: "10.17.0.0/16 of AZ az2 overlaps local 10.16.0.0/12"})
		}, "interconnect/default", []string{"overlaps local"}},
		{"clusterset Secret broken", func(in *Inputs) {
			in.InterConnect.Status.Conditions = append(in.InterConnect.Status.Conditions, metav1.Condition{Type: kovnv1.ConditionCredentialsReady,
				Status: metav1.ConditionFalse, Message: "clusterset Secret kube-system/kovn-clusterset-tls: no tls.key"})
		}, "interconnect/default", []string{"no tls.key", "clusterset CA"}},
		{"join record tampered with", func(in *Inputs) {
			in.InterConnect.Status.Conditions = append(in.InterConnect.Status.Conditions, metav1.Condition{Type: kovnv1.ConditionDegraded,
				Status: metav1.ConditionTrue, Message: `put back: the holder of AZ az1 was changed to "evil"`})
		}, "interconnect/default", []string{`changed to "evil"`, "revoke it"}},
		{"subnet not ready", func(in *Inputs) {
			in.Subnets[0].Status.Conditions[0] = metav1.Condition{Type: kovnv1.ConditionReady, Status: metav1.ConditionFalse,
				Reason: "ValidationFailed", Message: "overlaps subnet other"}
		}, "subnet/ovn-default", []string{"ValidationFailed: overlaps subnet other"}},
		{"export conflict", func(in *Inputs) {
			in.Exports[0].Status.Conditions = append(in.Exports[0].Status.Conditions, metav1.Condition{Type: "Conflict",
				Status: metav1.ConditionTrue, Message: "port 80 protocol differs"})
		}, "serviceexport/ns/web", []string{"port 80 protocol differs"}},
		{"foreign AZ advertises more than agreed", func(in *Inputs) {
			in.ForeignAZs[0].Status.Conditions[1] = metav1.Condition{Type: kovnv1.ConditionRoutesAgreed, Status: metav1.ConditionFalse,
				Message: "AZ openstack advertises [10.250.2.0/24] outside acceptCIDRs"}
		}, "foreignaz/openstack", []string{"10.250.2.0/24", "spec.acceptCIDRs"}},
		{"foreign AZ spec invalid", func(in *Inputs) {
			in.ForeignAZs[0].Status.Conditions[0] = metav1.Condition{Type: kovnv1.ConditionReady, Status: metav1.ConditionFalse,
				Reason: kovnv1.ReasonValidationFailed, Message: "spec invalid: transitAddresses"}
		}, "foreignaz/openstack", []string{"transitAddresses", "last valid one stays programmed"}},
		{"BGP session down", func(in *Inputs) {
			in.BgpPeers[0].Status.Nodes[0] = kovnv1.BgpPeerNodeStatus{Node: "n1", State: kovnv1.BgpStateActive, LastError: "bad peer AS"}
		}, "bgppeer/tor", []string{"session Active: bad peer AS on n1"}},
	} {
		in := healthy()
		tc.break_(&in)
		r := Build(in)
		if len(r.Problems) != 1 {
			t.Errorf("%s: %d problems, want 1: %+v", tc.name, len(r.Problems), r.Problems)
			continue
		}
		p := r.Problems[0]
		text := p.Fault + " / " + p.Fix
		for _, s := range tc.says {
			if p.Object != tc.object || !strings.Contains(text, s) {
				t.Errorf("%s: problem %s %q, want %s saying %q", tc.name, p.Object, text, tc.object, s)
			}
		}
		var out strings.Builder
		PrintStatus(&out, r)
		if !strings.HasPrefix(out.String(), "1 problem(s): "+tc.object) || !strings.Contains(out.String(), "✗ "+tc.object) {
			t.Errorf("%s: table starts %q", tc.name, strings.SplitN(out.String(), "\n", 3)[:2])
		}
	}
}
