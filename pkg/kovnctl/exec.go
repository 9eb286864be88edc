package kovnctl

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/remotecommand"

	"github.com/kovn/kovn/pkg/ovn"
	"github.com/kovn/kovn/pkg/ovn/model/vswitch"
)

// The chart's pods kubectl-kovn runs tools in (kubectl exec, through the API server): a
// node's vswitchd container for ovs-appctl, ovs-ofctl and tcpdump (it shares the node's
// network), and OVN central's northd container for ovn-trace and ovn-appctl. Databases are
// read with kovn-ovsdb (libovsdb, typed rows as JSON) in the same pods, whose unix sockets
// only they reach; no OVSDB CLI's text is parsed.
const (
	KovnNamespace          = "kube-system"
	OVSApp                 = "kovn-ovs"
	OVSContainer           = "vswitchd"
	OVNControllerContainer = "ovn-controller"
	CentralApp             = "kovn-ovn-central"
	CentralContainer       = "northd"
	DaemonApp              = "kovn-daemon"
	VswitchdCtl            = "/var/run/openvswitch/ovs-vswitchd.ctl" // the chart names it (--unixctl)
	NBSocket               = "unix:/var/run/ovn/ovnnb_db.sock"
	SBSocket               = "unix:/var/run/ovn/ovnsb_db.sock"
	OVSSocket              = "unix:/var/run/openvswitch/db.sock"
	OVSDBTool              = "/kovn-ovsdb" // kovn's image holds its binaries at the root
	// ICContainer is the central pod's ovn-ic, which mounts the AZ's clusterset certificate
	// at ClustersetTLSDir (the chart's path) for the ssl: IC databases.
	ICContainer      = "ovn-ic"
	ClustersetTLSDir = "/etc/kovn/clusterset-tls"
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

// DumpJSON reads tables (all when none) of database db ("nb", "sb", "ic-nb", "ic-sb", "ovs")
// at endpoint with kovn-ovsdb in container of pod, and returns its JSON: table -> rows.
func (e *Execer) DumpJSON(ctx context.Context, pod, container, db, endpoint string, tables ...string) ([]byte, error) {
	var out bytes.Buffer
	argv := []string{OVSDBTool}
	if strings.HasPrefix(endpoint, "ssl:") {
		// ovn-ic's certificate: only its container mounts it.
		container = ICContainer
		argv = append(argv, "-cert", ClustersetTLSDir+"/tls.crt", "-key", ClustersetTLSDir+"/tls.key", "-cacert", ClustersetTLSDir+"/ca.crt")
	}
	err := e.Run(ctx, pod, container, append(append(argv, "dump", db, endpoint), tables...), &out)
	return out.Bytes(), err
}

// Dump is DumpJSON by table, for ovn.DecodeRows.
func (e *Execer) Dump(ctx context.Context, pod, container, db, endpoint string, tables ...string) (map[string]json.RawMessage, error) {
	raw, err := e.DumpJSON(ctx, pod, container, db, endpoint, tables...)
	if err != nil {
		return nil, err
	}
	var dump map[string]json.RawMessage
	if err := json.Unmarshal(raw, &dump); err != nil {
		return nil, fmt.Errorf("reading %s's dump from %s: %w", db, pod, err)
	}
	return dump, nil
}

// HostInterface is the node-side interface of an OVN logical switch port on node: the OVS
// Interface whose external_ids:iface-id names the port.
func (e *Execer) HostInterface(ctx context.Context, node, port string) (string, error) {
	pod, err := e.NodePod(ctx, OVSApp, node)
	if err != nil {
		return "", err
	}
	dump, err := e.Dump(ctx, pod, OVSContainer, "ovs", OVSSocket, vswitch.InterfaceTable)
	if err != nil {
		return "", err
	}
	ifaces, err := ovn.DecodeRows[vswitch.Interface](dump, vswitch.InterfaceTable)
	if err != nil {
		return "", err
	}
	var names []string
	for _, i := range ifaces {
		if i.ExternalIDs["iface-id"] == port {
			names = append(names, i.Name)
		}
	}
	if len(names) != 1 {
		return "", fmt.Errorf("no single OVS interface on %s for logical port %s (%q)", node, port, names)
	}
	return names[0], nil
}
