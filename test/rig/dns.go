package rig

import (
	"context"
	"fmt"
	"net/netip"
	"path/filepath"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kovn/kovn/pkg/interconnect/mcs"
)

// Cluster DNS: CoreDNS (test/images/coredns, built from its Go module) runs as a Deployment in
// kube-system behind the kube-dns Service, whose ClusterIPs are the tenth address of each
// service range — the address kubelet's clusterDNS names. kovn serves that Service like any
// other: pods reach the DNS server, and the server reaches the apiserver (the kubernetes
// Service), through kovn's load balancers.
const (
	CoreDNSImage   = "kovn.io/coredns:latest"
	DNSNamespace   = "kube-system"
	DNSDeployment  = "coredns"
	DNSService     = "kube-dns"
	DNSAppLabel    = "kube-dns" // k8s-app label of the DNS pods and the Service selector
	DNSReplicas    = 2
	DNSReadyPort   = 8181
	DNSHealthPort  = 8080
	ClusterDomain  = "cluster.local"
	dnsClusterRole = "kovn-rig:coredns"
)

// Corefile is the DNS server's configuration: cluster.local, the MCS zone clusterset.local
// (ServiceImports and kovn's MCS EndpointSlices, through the kubernetes plugin's multicluster
// option) and the reverse zones from the Kubernetes API, nothing else (the lab has no
// upstream resolver). Short TTLs keep answers close to the API: a test sees a pod turn
// unready within seconds.
const Corefile = `.:53 {
    errors
    log . {
        class denial error
    }
    health :8080
    ready :8181
    kubernetes cluster.local clusterset.local in-addr.arpa ip6.arpa {
        pods insecure
        multicluster clusterset.local
        fallthrough in-addr.arpa ip6.arpa
        ttl 5
    }
    cache 5
}
`

// ClusterDNSIPs are the kube-dns Service's ClusterIPs: the tenth address of each of cluster
// cl's service ranges, primary family first (10.96.0.10 and fd00:10:96::a for cluster 1).
func (c Config) ClusterDNSIPs(cl int) []string {
	var out []string
	for _, p := range c.ServiceCIDRs(cl) {
		out = append(out, tenth(p).String())
	}
	return out
}

// clusterDNSIP is kubelet's clusterDNS: the primary family's kube-dns ClusterIP.
func (c Config) clusterDNSIP(cl int) string { return c.ClusterDNSIPs(cl)[0] }

func tenth(p netip.Prefix) netip.Addr {
	a := p.Masked().Addr()
	for i := 0; i < 10; i++ {
		a = a.Next()
	}
	return a
}

// DNSObjects are the objects that run cluster DNS, in apply order, for a kube-dns Service with
// these ClusterIPs (primary first).
func DNSObjects(clusterIPs []string) ([]*unstructured.Unstructured, error) {
	labels := map[string]string{"k8s-app": DNSAppLabel}
	meta := func(name string) metav1.ObjectMeta {
		return metav1.ObjectMeta{Name: name, Namespace: DNSNamespace, Labels: labels}
	}
	policy := corev1.IPFamilyPolicySingleStack
	if len(clusterIPs) > 1 {
		policy = corev1.IPFamilyPolicyPreferDualStack
	}
	replicas := int32(DNSReplicas)
	grace := int64(5)
	httpProbe := func(path string, port int32, period, failures int32) *corev1.Probe {
		return &corev1.Probe{PeriodSeconds: period, FailureThreshold: failures, TimeoutSeconds: 2,
			ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: path, Port: intstr.FromInt32(port)}}}
	}
	// mcs-api's CRDs come first, as in mcs-api's own kind rig: the multicluster option lists
	// ServiceImports, and DNS is not ready until that list succeeds. kovn-controller installs
	// the same CRDs.
	crds, err := mcs.CRDs()
	if err != nil {
		return nil, err
	}
	var typed []runtime.Object
	for _, crd := range crds {
		crd.TypeMeta = tm("apiextensions.k8s.io/v1", "CustomResourceDefinition")
		typed = append(typed, crd)
	}
	typed = append(typed, []runtime.Object{
		&corev1.ServiceAccount{TypeMeta: tm("v1", "ServiceAccount"), ObjectMeta: meta(DNSDeployment)},
		// The kubernetes plugin lists and watches these (pods only with `pods verified`).
		&rbacv1.ClusterRole{TypeMeta: tm("rbac.authorization.k8s.io/v1", "ClusterRole"),
			ObjectMeta: metav1.ObjectMeta{Name: dnsClusterRole, Labels: labels},
			Rules: []rbacv1.PolicyRule{
				{APIGroups: []string{""}, Resources: []string{"services", "namespaces"}, Verbs: []string{"list", "watch"}},
				{APIGroups: []string{"discovery.k8s.io"}, Resources: []string{"endpointslices"}, Verbs: []string{"list", "watch"}},
				{APIGroups: []string{"multicluster.x-k8s.io"}, Resources: []string{"serviceimports"}, Verbs: []string{"list", "watch"}},
			}},
		&rbacv1.ClusterRoleBinding{TypeMeta: tm("rbac.authorization.k8s.io/v1", "ClusterRoleBinding"),
			ObjectMeta: metav1.ObjectMeta{Name: dnsClusterRole, Labels: labels},
			RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: dnsClusterRole},
			Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: DNSDeployment, Namespace: DNSNamespace}}},
		&corev1.ConfigMap{TypeMeta: tm("v1", "ConfigMap"), ObjectMeta: meta(DNSDeployment), Data: map[string]string{"Corefile": Corefile}},
		&appsv1.Deployment{TypeMeta: tm("apps/v1", "Deployment"), ObjectMeta: meta(DNSDeployment), Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: corev1.PodSpec{
				ServiceAccountName: DNSDeployment, PriorityClassName: "system-cluster-critical",
				// The server resolves nothing outside the cluster, and must not ask itself.
				DNSPolicy:                     corev1.DNSDefault,
				TerminationGracePeriodSeconds: &grace,
				Affinity: &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
					PreferredDuringSchedulingIgnoredDuringExecution: []corev1.WeightedPodAffinityTerm{{Weight: 100,
						PodAffinityTerm: corev1.PodAffinityTerm{TopologyKey: "kubernetes.io/hostname",
							LabelSelector: &metav1.LabelSelector{MatchLabels: labels}}}}}},
				Containers: []corev1.Container{{
					Name: "coredns", Image: CoreDNSImage, ImagePullPolicy: corev1.PullNever,
					Args: []string{"-conf", "/etc/coredns/Corefile"},
					Ports: []corev1.ContainerPort{
						{Name: "dns", ContainerPort: 53, Protocol: corev1.ProtocolUDP},
						{Name: "dns-tcp", ContainerPort: 53, Protocol: corev1.ProtocolTCP},
						{Name: "health", ContainerPort: DNSHealthPort, Protocol: corev1.ProtocolTCP},
						{Name: "ready", ContainerPort: DNSReadyPort, Protocol: corev1.ProtocolTCP},
					},
					ReadinessProbe: httpProbe("/ready", DNSReadyPort, 1, 1),
					LivenessProbe:  httpProbe("/health", DNSHealthPort, 10, 5),
					VolumeMounts:   []corev1.VolumeMount{{Name: "config", MountPath: "/etc/coredns", ReadOnly: true}},
				}},
				Volumes: []corev1.Volume{{Name: "config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
					LocalObjectReference: corev1.LocalObjectReference{Name: DNSDeployment}}}}},
			}},
		}},
		&corev1.Service{TypeMeta: tm("v1", "Service"), ObjectMeta: meta(DNSService), Spec: corev1.ServiceSpec{
			Selector: labels, ClusterIP: clusterIPs[0], ClusterIPs: clusterIPs, IPFamilyPolicy: &policy,
			Ports: []corev1.ServicePort{
				{Name: "dns", Port: 53, Protocol: corev1.ProtocolUDP, TargetPort: intstr.FromInt32(53)},
				{Name: "dns-tcp", Port: 53, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromInt32(53)},
			}}},
	}...)
	var out []*unstructured.Unstructured
	for _, o := range typed {
		m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(o)
		if err != nil {
			return nil, err
		}
		u := &unstructured.Unstructured{Object: m}
		unstructured.RemoveNestedField(u.Object, "metadata", "creationTimestamp")
		unstructured.RemoveNestedField(u.Object, "spec", "template", "metadata", "creationTimestamp")
		unstructured.RemoveNestedField(u.Object, "status")
		out = append(out, u)
	}
	return out, nil
}

func tm(apiVersion, kind string) metav1.TypeMeta {
	return metav1.TypeMeta{APIVersion: apiVersion, Kind: kind}
}

// dnsResources names the resource of each kind DNSObjects returns.
var dnsResources = map[string]string{"CustomResourceDefinition": "customresourcedefinitions", "ServiceAccount": "serviceaccounts", "ClusterRole": "clusterroles",
	"ClusterRoleBinding": "clusterrolebindings", "ConfigMap": "configmaps", "Deployment": "deployments", "Service": "services"}

// ApplyDNS server-side applies the cluster DNS objects with the admin kubeconfig, retrying until
// kube-system exists (idempotent: a rerun is a no-op). It does not wait for the pods.
func ApplyDNS(ctx context.Context, adminKubeconfig string, clusterIPs []string) error {
	admin, err := clientcmd.BuildConfigFromFlags("", adminKubeconfig)
	if err != nil {
		return err
	}
	admin.Timeout = 10 * time.Second
	dyn, err := dynamic.NewForConfig(admin)
	if err != nil {
		return err
	}
	objs, err := DNSObjects(clusterIPs)
	if err != nil {
		return err
	}
	return retry(ctx, func() error {
		for _, u := range objs {
			gvk := u.GroupVersionKind()
			res := dyn.Resource(gvk.GroupVersion().WithResource(dnsResources[gvk.Kind]))
			var ri dynamic.ResourceInterface = res
			if u.GetNamespace() != "" {
				ri = res.Namespace(u.GetNamespace())
			}
			if _, err := ri.Apply(ctx, u.GetName(), u, metav1.ApplyOptions{FieldManager: "kovn-rig", Force: true}); err != nil {
				return fmt.Errorf("apply %s %s: %w", gvk.Kind, u.GetName(), err)
			}
		}
		return nil
	})
}

// dnsStep is the one-shot control-plane step that applies the cluster DNS objects.
func (c Config) dnsStep(cl int, admin, logDir string) Step {
	return Step{Name: "cluster-dns", Log: filepath.Join(logDir, "cluster-dns.log"), Timeout: 90 * time.Second,
		Argv: []string{filepath.Join(c.KovnBinDir, "kovn-rig"), "cluster-dns", "--admin-kubeconfig=" + admin,
			"--cluster-ips=" + strings.Join(c.ClusterDNSIPs(cl), ",")}}
}
