package mcs

import (
	"fmt"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	mcsv1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
)

func export(cluster string, age int, ports ...Port) Export {
	return Export{Cluster: cluster, Namespace: "ns", Name: "web", Type: "ClusterSetIP", SessionAffinity: "None",
		IPFamilies: []string{"IPv4"}, Ports: ports, ExportedAt: time.Unix(int64(1000-age), 0)}
}

func TestMergeUnionsPortsAndFlagsConflicts(t *testing.T) {
	http := Port{Name: "http", Protocol: "TCP", Port: 80}
	dns := Port{Name: "dns", Protocol: "UDP", Port: 53}
	t.Run("same ports: no conflict", func(t *testing.T) {
		im := Merge([]Export{export("a", 2, http), export("b", 1, http)})
		if len(im.Conflicts) != 0 || !slices.Equal(im.Ports, []Port{http}) || !slices.Equal(im.Clusters, []string{"a", "b"}) {
			t.Fatalf("got %+v", im)
		}
	})
	t.Run("different ports: the union, PortConflict", func(t *testing.T) {
		im := Merge([]Export{export("a", 2, http), export("b", 1, dns)})
		if !slices.Equal(im.Conflicts, []mcsv1.ServiceExportConditionReason{mcsv1.ServiceExportReasonPortConflict}) {
			t.Fatalf("conflicts %v", im.Conflicts)
		}
		if !slices.Equal(im.Ports, []Port{dns, http}) {
			t.Fatalf("ports %v, want the union", im.Ports)
		}
	})
	t.Run("a port name with another number: the oldest export's number", func(t *testing.T) {
		other := Port{Name: "http", Protocol: "TCP", Port: 8080}
		im := Merge([]Export{export("a", 2, http), export("b", 1, other)})
		if !slices.Equal(im.Ports, []Port{http}) || !slices.Contains(im.Conflicts, mcsv1.ServiceExportReasonPortConflict) {
			t.Fatalf("got %+v", im)
		}
	})
	t.Run("the union stays a valid Service's ports: unnamed ports and a number twice are not added", func(t *testing.T) {
		bare80 := Port{Protocol: "TCP", Port: 80}
		bare81 := Port{Protocol: "TCP", Port: 81}
		web80 := Port{Name: "web", Protocol: "TCP", Port: 80}
		for _, tc := range []struct {
			name          string
			oldest, newer []Port
			want          []Port
		}{
			{"two unnamed ports", []Port{bare80}, []Port{bare81}, []Port{bare80}},
			{"a named port beside an unnamed one", []Port{bare80}, []Port{dns}, []Port{bare80}},
			{"an unnamed port beside named ones", []Port{http}, []Port{bare81}, []Port{http}},
			{"one protocol and number under two names", []Port{http}, []Port{web80, dns}, []Port{dns, http}},
		} {
			im := Merge([]Export{export("a", 2, tc.oldest...), export("b", 1, tc.newer...)})
			if !slices.Equal(im.Ports, tc.want) || !slices.Contains(im.Conflicts, mcsv1.ServiceExportReasonPortConflict) {
				t.Errorf("%s: ports %v conflicts %v, want %v and PortConflict", tc.name, im.Ports, im.Conflicts, tc.want)
			}
			svc := DerivedService(im)
			var errs []string
			seen := map[string]bool{}
			for _, p := range svc.Spec.Ports {
				if len(svc.Spec.Ports) > 1 && p.Name == "" || seen[string(p.Protocol)+fmt.Sprint(p.Port)] {
					errs = append(errs, fmt.Sprintf("%+v", p))
				}
				seen[string(p.Protocol)+fmt.Sprint(p.Port)] = true
			}
			if len(errs) > 0 {
				t.Errorf("%s: the derived Service's ports are invalid: %v", tc.name, errs)
			}
		}
	})
	t.Run("headless against ClusterSetIP: the oldest's type, TypeConflict", func(t *testing.T) {
		b := export("b", 1, http)
		b.Type = "Headless"
		im := Merge([]Export{export("a", 2, http), b})
		if im.Type != "ClusterSetIP" || !slices.Equal(im.Conflicts, []mcsv1.ServiceExportConditionReason{mcsv1.ServiceExportReasonTypeConflict}) {
			t.Fatalf("got %+v", im)
		}
		if im.Message == "" {
			t.Fatal("a conflict without a message")
		}
	})
	t.Run("affinity, its timeout, labels", func(t *testing.T) {
		a, b, c := export("a", 3, http), export("b", 2, http), export("c", 1, http)
		a.SessionAffinity, a.AffinityTimeout = "ClientIP", ptr.To(10)
		b.SessionAffinity, b.AffinityTimeout = "ClientIP", ptr.To(20)
		c.SessionAffinity, c.Labels = "None", map[string]string{"x": "y"}
		im := Merge([]Export{a, b, c})
		want := []mcsv1.ServiceExportConditionReason{mcsv1.ServiceExportReasonSessionAffinityConfigConflict,
			mcsv1.ServiceExportReasonSessionAffinityConflict, mcsv1.ServiceExportReasonLabelsConflict}
		if !slices.Equal(im.Conflicts, want) || *im.AffinityTimeout != 10 {
			t.Fatalf("got %v (timeout %d), want %v", im.Conflicts, *im.AffinityTimeout, want)
		}
	})
}

func TestExportOf(t *testing.T) {
	se := &mcsv1.ServiceExport{ObjectMeta: metav1.ObjectMeta{CreationTimestamp: metav1.Unix(5, 0)},
		Spec: mcsv1.ServiceExportSpec{ExportedLabels: map[string]string{"tier": "web"}}}
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web"}, Spec: corev1.ServiceSpec{
		ClusterIP: "10.96.0.5", IPFamilies: []corev1.IPFamily{corev1.IPv6Protocol, corev1.IPv4Protocol},
		SessionAffinity: corev1.ServiceAffinityClientIP, SessionAffinityConfig: &corev1.SessionAffinityConfig{
			ClientIP: &corev1.ClientIPConfig{TimeoutSeconds: ptr.To[int32](30)}},
		Ports: []corev1.ServicePort{{Name: "http", Port: 80}}}}
	e, reason, _ := ExportOf("c1", svc, se)
	if reason != "" || e.Type != "ClusterSetIP" || *e.AffinityTimeout != 30 || e.Ports[0].Protocol != "TCP" ||
		!slices.Equal(e.IPFamilies, []string{"IPv6", "IPv4"}) || e.Labels["tier"] != "web" || e.ExportedAt.Unix() != 5 {
		t.Fatalf("got %+v", e)
	}
	svc.Spec.ClusterIP = corev1.ClusterIPNone
	if e, _, _ := ExportOf("c1", svc, se); e.Type != "Headless" {
		t.Fatalf("headless exported as %s", e.Type)
	}
	svc.Spec.Type = corev1.ServiceTypeExternalName
	if _, reason, _ := ExportOf("c1", svc, se); reason != mcsv1.ServiceExportReasonInvalidServiceType {
		t.Fatalf("ExternalName: reason %q", reason)
	}
}

func TestSlicesOfSkipsImportedSlices(t *testing.T) {
	own := discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Name: "web-abc"}, AddressType: discoveryv1.AddressTypeIPv4,
		Ports:     []discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To[int32](8080)}},
		Endpoints: []discoveryv1.Endpoint{{Addresses: []string{"10.16.0.4"}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(false)}}}}
	imported := discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Name: "derived", Labels: map[string]string{mcsv1.LabelServiceName: "web"}},
		AddressType: discoveryv1.AddressTypeIPv4}
	selectorless := &corev1.Service{}
	got := SlicesOf(selectorless, []discoveryv1.EndpointSlice{own, imported})
	if len(got) != 1 || got[0].Name != "web-abc" || got[0].Ports[0] != (Port{Name: "http", Protocol: "TCP", Port: 8080}) ||
		got[0].Endpoints[0].Ready || !got[0].Endpoints[0].Serving {
		t.Fatalf("got %+v", got)
	}
	// With a selector, only the endpointslice controller's slices: a hand-made one with the
	// service-name label is not exported.
	selected := &corev1.Service{Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "web"}}}
	managed := own.DeepCopy()
	managed.Name, managed.Labels = "web-managed", map[string]string{discoveryv1.LabelManagedBy: "endpointslice-controller.k8s.io"}
	got = SlicesOf(selected, []discoveryv1.EndpointSlice{own, *managed, imported})
	if len(got) != 1 || got[0].Name != "web-managed" {
		t.Fatalf("Service with a selector exported %+v, want only the endpointslice controller's slice", got)
	}
}

func TestImportedSlicesAndDerivedService(t *testing.T) {
	http := Port{Name: "http", Protocol: "TCP", Port: 80}
	im := Merge([]Export{export("a", 2, http), export("b", 1, http)})
	store := []Slice{
		{Cluster: "a", Name: "web-1", AddressType: "IPv4", Ports: []Port{{Name: "http", Protocol: "TCP", Port: 8080}, {Name: "gone", Protocol: "TCP", Port: 1}},
			Endpoints: []Endpoint{{Addresses: []string{"10.16.0.4"}, Ready: true, Serving: true, NodeName: ptr.To("n1")}}},
		{Cluster: "b", Name: "web-1", AddressType: "IPv4", Ports: []Port{{Name: "http", Protocol: "TCP", Port: 8080}},
			Endpoints: []Endpoint{{Addresses: []string{"10.17.0.4"}, Ready: true, Serving: true, NodeName: ptr.To("n1")}}},
		{Cluster: "left", Name: "web-1", AddressType: "IPv4"},
	}
	got := ImportedSlices(im, store, "a")
	if len(got) != 2 {
		t.Fatalf("%d slices, want one per exporting cluster's slice", len(got))
	}
	for _, es := range got {
		// internalTrafficPolicy=Local needs the node of this cluster's own endpoints; b's
		// node "n1" is not this cluster's n1.
		local := es.Labels[mcsv1.LabelSourceCluster] == "a"
		if n := es.Endpoints[0].NodeName; local != (n != nil && *n == "n1") {
			t.Errorf("cluster %s's endpoint has node %v, want it only on this cluster's (a) endpoints", es.Labels[mcsv1.LabelSourceCluster], n)
		}
	}
	if got[0].Name == got[1].Name {
		t.Fatal("slices of two clusters with the same name collide")
	}
	for _, es := range got {
		if es.Labels[discoveryv1.LabelServiceName] != DerivedName("web") || es.Labels[mcsv1.LabelServiceName] != "web" ||
			es.Labels[discoveryv1.LabelManagedBy] != ManagedBy || es.Labels[mcsv1.LabelSourceCluster] == "" {
			t.Fatalf("labels %v", es.Labels)
		}
		if len(es.Ports) != 1 || *es.Ports[0].Name != "http" || *es.Ports[0].Port != 8080 {
			t.Fatalf("ports %+v: only the import's ports, with the target port", es.Ports)
		}
	}
	svc := DerivedService(im)
	if svc.Name != DerivedName("web") || svc.Spec.Selector != nil || svc.Spec.Ports[0].Port != 80 || svc.Spec.ClusterIP != "" {
		t.Fatalf("derived %+v", svc.Spec)
	}
	svc.Spec.ClusterIPs = []string{"10.96.1.1"}
	if spec := ImportSpec(im, svc); !slices.Equal(spec.IPs, []string{"10.96.1.1"}) || spec.Type != mcsv1.ClusterSetIP {
		t.Fatalf("import spec %+v", spec)
	}
	im.Type = "Headless"
	if svc := DerivedService(im); svc.Spec.ClusterIP != corev1.ClusterIPNone {
		t.Fatal("a headless import's derived Service has a ClusterIP")
	}
}

// KEP-1645: traffic for an import's port goes only to clusters whose exported Service exposes
// that port (name, protocol and number). mcs-api's conformance case: c2 exports port tcp 42
// first, c1 exports tcp 4242 (target 42): port 42 is c2's alone.
func TestImportedSlicesOnlyForClustersExposingThePort(t *testing.T) {
	tcp42 := Port{Name: "tcp", Protocol: "TCP", Port: 42}
	tcp4242 := Port{Name: "tcp", Protocol: "TCP", Port: 4242}
	udp53 := Port{Name: "dns", Protocol: "UDP", Port: 53}
	im := Merge([]Export{export("c2", 2, tcp42), export("c1", 1, tcp4242, udp53)})
	if !slices.Equal(im.Ports, []Port{udp53, tcp42}) {
		t.Fatalf("import ports %v", im.Ports)
	}
	target := []Port{{Name: "tcp", Protocol: "TCP", Port: 42}, {Name: "dns", Protocol: "UDP", Port: 53}}
	store := []Slice{
		{Cluster: "c1", Name: "hello-1", AddressType: "IPv4", Ports: target, Endpoints: []Endpoint{{Addresses: []string{"10.16.0.4"}, Ready: true}}},
		{Cluster: "c2", Name: "hello-1", AddressType: "IPv4", Ports: target[:1], Endpoints: []Endpoint{{Addresses: []string{"10.17.0.4"}, Ready: true}}},
	}
	got := map[string][]string{}
	for _, es := range ImportedSlices(im, store, "c1") {
		for _, p := range es.Ports {
			got[es.Labels[mcsv1.LabelSourceCluster]] = append(got[es.Labels[mcsv1.LabelSourceCluster]], fmt.Sprintf("%s/%d", *p.Name, *p.Port))
		}
	}
	if !slices.Equal(got["c2"], []string{"tcp/42"}) || !slices.Equal(got["c1"], []string{"dns/53"}) {
		t.Fatalf("ports per cluster %v: want port tcp (42) served by c2 alone, dns by c1 alone", got)
	}
}
