package rig

import (
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

func TestClusterDNSIPs(t *testing.T) {
	for fam, want := range map[string]string{
		Dual: "10.96.0.10,fd00:10:96::a", IPv4: "10.96.0.10", IPv6: "fd00:10:96::a",
	} {
		c := Config{IPFamily: fam}
		if got := strings.Join(c.ClusterDNSIPs(1), ","); got != want {
			t.Errorf("%s: cluster DNS IPs %s, want %s", fam, got, want)
		}
		if got := c.clusterDNSIP(1); got != strings.Split(want, ",")[0] {
			t.Errorf("%s: kubelet clusterDNS %s, want the primary %s", fam, got, strings.Split(want, ",")[0])
		}
	}
	if got := (Config{IPFamily: IPv4}).ClusterDNSIPs(2); got[0] != "10.97.0.10" {
		t.Errorf("cluster 2: %v", got)
	}
}

func TestDNSObjects(t *testing.T) {
	for _, ips := range [][]string{{"10.96.0.10", "fd00:10:96::a"}, {"fd00:10:96::a"}} {
		objs, err := DNSObjects(ips)
		if err != nil {
			t.Fatal(err)
		}
		var kinds []string
		var svc corev1.Service
		var dep appsv1.Deployment
		for _, u := range objs {
			kinds = append(kinds, u.GetKind())
			if _, ok := dnsResources[u.GetKind()]; !ok {
				t.Errorf("%s: no resource name", u.GetKind())
			}
			if _, ok := u.Object["status"]; ok {
				t.Errorf("%s carries a status: server-side apply would own it", u.GetKind())
			}
			switch u.GetKind() {
			case "Service":
				_ = runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &svc)
			case "Deployment":
				_ = runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &dep)
			}
		}
		if got := strings.Join(kinds, ","); got != "CustomResourceDefinition,CustomResourceDefinition,ServiceAccount,ClusterRole,ClusterRoleBinding,ConfigMap,Deployment,Service" {
			t.Fatalf("kinds in apply order: %s", got)
		}
		wantPolicy := corev1.IPFamilyPolicySingleStack
		if len(ips) == 2 {
			wantPolicy = corev1.IPFamilyPolicyPreferDualStack
		}
		if svc.Name != DNSService || svc.Namespace != "kube-system" || svc.Spec.ClusterIP != ips[0] ||
			strings.Join(svc.Spec.ClusterIPs, ",") != strings.Join(ips, ",") || *svc.Spec.IPFamilyPolicy != wantPolicy {
			t.Errorf("Service %s/%s: clusterIPs %v policy %v, want %v %v", svc.Namespace, svc.Name, svc.Spec.ClusterIPs, *svc.Spec.IPFamilyPolicy, ips, wantPolicy)
		}
		var ports []string
		for _, p := range svc.Spec.Ports {
			ports = append(ports, p.Name+"/"+string(p.Protocol)+"/"+p.TargetPort.String())
		}
		if strings.Join(ports, ",") != "dns/UDP/53,dns-tcp/TCP/53" {
			t.Errorf("Service ports %v", ports)
		}
		pod := dep.Spec.Template.Spec
		ctr := pod.Containers[0]
		if ctr.Image != CoreDNSImage || ctr.ImagePullPolicy != corev1.PullNever || pod.ServiceAccountName != DNSDeployment ||
			pod.DNSPolicy != corev1.DNSDefault {
			t.Errorf("pod spec: image %s pull %s sa %s dnsPolicy %s", ctr.Image, ctr.ImagePullPolicy, pod.ServiceAccountName, pod.DNSPolicy)
		}
		if got := ctr.ReadinessProbe.HTTPGet.Port.IntValue(); got != DNSReadyPort || !strings.Contains(Corefile, "ready :8181") {
			t.Errorf("readiness probe port %d does not match the Corefile's ready plugin", got)
		}
		if got := ctr.LivenessProbe.HTTPGet.Port.IntValue(); got != DNSHealthPort || !strings.Contains(Corefile, "health :8080") {
			t.Errorf("liveness probe port %d does not match the Corefile's health plugin", got)
		}
		for k, v := range svc.Spec.Selector {
			if dep.Spec.Template.Labels[k] != v {
				t.Errorf("Service selector %v does not select the pods %v", svc.Spec.Selector, dep.Spec.Template.Labels)
			}
		}
	}
}
