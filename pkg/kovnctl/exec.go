package kovnctl

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/remotecommand"
)

// The chart's pods kubectl-kovn runs OVS and OVN tools in (kubectl exec, through the API
// server): a node's vswitchd container for ovs-vsctl, ovs-appctl, ovs-ofctl and tcpdump (it
// shares the node's network), and OVN central's northd container for ovn-nbctl, ovn-sbctl,
// ovn-trace and ovsdb-client (the databases' unix sockets are in its /var/run/ovn).
const (
	KovnNamespace     = "kube-system"
	OVSApp            = "kovn-ovs"
	OVSContainer      = "vswitchd"
	OVNControllerCont = "ovn-controller"
	CentralApp        = "kovn-ovn-central"
	CentralContainer  = "northd"
	DaemonApp         = "kovn-daemon"
	VswitchdCtl       = "/var/run/openvswitch/ovs-vswitchd.ctl" // the chart names it (--unixctl)
	NBSocket          = "unix:/var/run/ovn/ovnnb_db.sock"
	SBSocket          = "unix:/var/run/ovn/ovnsb_db.sock"
)

// Execer runs commands in the chart's pods.
type Execer struct {
	Config *rest.Config // without a client timeout: a capture streams for as long as it runs
	Kube   kubernetes.Interface
}

// NewExecer makes an Execer from a client configuration.
func NewExecer(cfg *rest.Config) (*Execer, error) {
	cfg = rest.CopyConfig(cfg)
	cfg.Timeout = 0
	kc, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	return &Execer{Config: cfg, Kube: kc}, nil
}

// Run runs argv in container of pod (in KovnNamespace), streaming its output to stdout.
func (e *Execer) Run(ctx context.Context, pod, container string, argv []string, stdout io.Writer) error {
	req := e.Kube.CoreV1().RESTClient().Post().Resource("pods").Namespace(KovnNamespace).Name(pod).SubResource("exec").
		VersionedParams(&corev1.PodExecOptions{Container: container, Command: argv, Stdout: true, Stderr: true}, scheme.ParameterCodec)
	ex, err := remotecommand.NewSPDYExecutor(e.Config, "POST", req.URL())
	if err != nil {
		return err
	}
	var stderr bytes.Buffer
	if err := ex.StreamWithContext(ctx, remotecommand.StreamOptions{Stdout: stdout, Stderr: &stderr}); err != nil {
		return fmt.Errorf("%s in %s/%s: %w: %s", strings.Join(argv, " "), pod, container, err, strings.TrimSpace(stderr.String()))
	}
	return nil
}

// Output runs argv and returns its standard output.
func (e *Execer) Output(ctx context.Context, pod, container string, argv ...string) (string, error) {
	var out bytes.Buffer
	err := e.Run(ctx, pod, container, argv, &out)
	return out.String(), err
}

// NodePod is the name of app's running pod on node.
func (e *Execer) NodePod(ctx context.Context, app, node string) (string, error) {
	pods, err := e.Kube.CoreV1().Pods(KovnNamespace).List(ctx, metav1.ListOptions{LabelSelector: "app=" + app, FieldSelector: "spec.nodeName=" + node})
	if err != nil {
		return "", err
	}
	for _, p := range pods.Items {
		if p.Status.Phase == corev1.PodRunning {
			return p.Name, nil
		}
	}
	return "", fmt.Errorf("no running %s pod on node %s (kubectl-kovn runs OVS tools in the pods of kovn's chart)", app, node)
}

// CentralPod is a running OVN central pod.
func (e *Execer) CentralPod(ctx context.Context) (string, error) {
	pods, err := e.Kube.CoreV1().Pods(KovnNamespace).List(ctx, metav1.ListOptions{LabelSelector: "app=" + CentralApp})
	if err != nil {
		return "", err
	}
	for _, p := range pods.Items {
		if p.Status.Phase == corev1.PodRunning {
			return p.Name, nil
		}
	}
	return "", fmt.Errorf("no running %s pod (kubectl-kovn runs OVN tools in the pods of kovn's chart)", CentralApp)
}

// OnNode runs argv in the node's vswitchd container.
func (e *Execer) OnNode(ctx context.Context, node string, argv ...string) (string, error) {
	pod, err := e.NodePod(ctx, OVSApp, node)
	if err != nil {
		return "", err
	}
	return e.Output(ctx, pod, OVSContainer, argv...)
}

// OnCentral runs argv in OVN central's northd container.
func (e *Execer) OnCentral(ctx context.Context, argv ...string) (string, error) {
	pod, err := e.CentralPod(ctx)
	if err != nil {
		return "", err
	}
	return e.Output(ctx, pod, CentralContainer, argv...)
}

// HostInterface is the node-side interface of an OVN logical switch port on node.
func (e *Execer) HostInterface(ctx context.Context, node, port string) (string, error) {
	out, err := e.OnNode(ctx, node, "ovs-vsctl", "--bare", "--columns=name", "find", "Interface", "external_ids:iface-id="+port)
	if err != nil {
		return "", err
	}
	name := strings.TrimSpace(out)
	if name == "" || strings.Contains(name, "\n") {
		return "", fmt.Errorf("no single OVS interface on %s for logical port %s (%q)", node, port, name)
	}
	return name, nil
}
