package contract

import "testing"

// The names are a wire contract between two binaries that may run different versions during
// an upgrade; a change here strands every existing port, so the test pins them.
func TestNamesAreStable(t *testing.T) {
	for _, c := range []struct{ got, want string }{
		{PodPortName("ns1", "web-0"), "web-0.ns1"},
		{AttachmentPortName("ns1", "web-0", "net1"), "web-0.ns1.net1"},
		{NodePortName("n1"), "node-n1"},
		{LabelNode, "kovn.io/node"},
		{LabelSubnet, "kovn.io/subnet"},
		{LabelStatefulSet, "kovn.io/statefulset"},
	} {
		if c.got != c.want {
			t.Errorf("got %q, want %q", c.got, c.want)
		}
	}
}

// kube-proxy skips a Service carrying either label, whatever the value (empty included).
func TestServedByKovn(t *testing.T) {
	for _, c := range []struct {
		labels map[string]string
		want   bool
	}{
		{nil, true},
		{map[string]string{"app": "web"}, true},
		{map[string]string{LabelServiceProxyName: "other-proxy"}, false},
		{map[string]string{LabelServiceProxyName: ""}, false},
		{map[string]string{LabelHeadless: ""}, false},
	} {
		if got := ServedByKovn(c.labels); got != c.want {
			t.Errorf("ServedByKovn(%v) = %t, want %t", c.labels, got, c.want)
		}
	}
	if LabelServiceProxyName != "service.kubernetes.io/service-proxy-name" || LabelHeadless != "service.kubernetes.io/headless" {
		t.Error("the labels are Kubernetes' own names")
	}
}
