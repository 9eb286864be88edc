package cni

import (
	"encoding/json"
	"fmt"

	"github.com/containernetworking/cni/pkg/types"
)

// Defaults shared by the shim and the daemon.
const (
	// DefaultSocketPath is where kovn-daemon serves CNI requests unless the network
	// configuration's serverSocket says otherwise.
	DefaultSocketPath = "/run/kovn/cni.sock"
	// DefaultMTU fits a pod's packets plus geneve encapsulation into a 1500-byte fabric.
	DefaultMTU = 1400
	// ResultVersion is the CNI spec version of results the daemon returns; the shim
	// converts them to the version the runtime asked for.
	ResultVersion = "1.0.0"
)

// CNI commands forwarded to the daemon.
const (
	CmdAdd   = "ADD"
	CmdDel   = "DEL"
	CmdCheck = "CHECK"
)

// Request is one CNI invocation as the shim forwards it to kovn-daemon.
type Request struct {
	// Command is CmdAdd, CmdDel or CmdCheck.
	Command string `json:"command"`
	// ContainerID is CNI_CONTAINERID, the pod sandbox id.
	ContainerID string `json:"containerID"`
	// Netns is CNI_NETNS, a path in the shim's mount namespace; empty on the later DELs.
	Netns string `json:"netns,omitempty"`
	// IfName is CNI_IFNAME, the interface to create inside the pod (eth0).
	IfName       string `json:"ifName"`
	PodName      string `json:"podName,omitempty"`
	PodNamespace string `json:"podNamespace,omitempty"`
	PodUID       string `json:"podUID,omitempty"`
	// Config is the network configuration the runtime passed on stdin, verbatim.
	Config []byte `json:"config,omitempty"`
}

// Response is the daemon's answer: Result (a CNI result in ResultVersion, ADD only) or
// Error.
type Response struct {
	Result json.RawMessage `json:"result,omitempty"`
	Error  *types.Error    `json:"error,omitempty"`
}

// Validate checks that r carries what its command needs. DEL needs only the container id:
// the runtime's garbage collector sends it without netns and sometimes without pod names.
func (r *Request) Validate() error {
	var missing []string
	need := func(v, what string) {
		if v == "" {
			missing = append(missing, what)
		}
	}
	need(r.ContainerID, "container id (CNI_CONTAINERID)")
	switch r.Command {
	case CmdDel:
	case CmdAdd, CmdCheck:
		need(r.Netns, "network namespace (CNI_NETNS)")
		need(r.IfName, "interface name (CNI_IFNAME)")
		need(r.PodNamespace, "pod namespace (K8S_POD_NAMESPACE in CNI_ARGS)")
		need(r.PodName, "pod name (K8S_POD_NAME in CNI_ARGS)")
	default:
		return fmt.Errorf("%w: unknown CNI command %q", ErrInvalidRequest, r.Command)
	}
	if len(missing) > 0 {
		return fmt.Errorf("%w: %s request without %s", ErrInvalidRequest, r.Command, joinList(missing))
	}
	return nil
}

// PodKey is "namespace/name" for logs and errors.
func (r *Request) PodKey() string {
	return r.PodNamespace + "/" + r.PodName
}

// joinList joins with ", " and a final " and ".
func joinList(s []string) string {
	switch len(s) {
	case 0:
		return ""
	case 1:
		return s[0]
	}
	out := s[0]
	for _, v := range s[1 : len(s)-1] {
		out += ", " + v
	}
	return out + " and " + s[len(s)-1]
}

// NetConf is kovn-cni's network configuration: the standard keys plus where the daemon
// listens and an optional MTU.
type NetConf struct {
	types.NetConf
	// ServerSocket is kovn-daemon's unix socket (DefaultSocketPath when empty).
	ServerSocket string `json:"serverSocket,omitempty"`
	// MTU overrides DefaultMTU for pods whose network does not set one.
	MTU int `json:"mtu,omitempty"`
}

// ParseNetConf decodes the configuration given on stdin and fills defaults.
func ParseNetConf(data []byte) (*NetConf, error) {
	conf := &NetConf{}
	if err := json.Unmarshal(data, conf); err != nil {
		return nil, fmt.Errorf("%w: decoding kovn-cni network configuration: %w", ErrDecoding, err)
	}
	if conf.ServerSocket == "" {
		conf.ServerSocket = DefaultSocketPath
	}
	if conf.MTU != 0 && (conf.MTU < minMTU || conf.MTU > maxMTU) {
		return nil, fmt.Errorf("%w: mtu %d is outside %d-%d", ErrInvalidConfig, conf.MTU, minMTU, maxMTU)
	}
	return conf, nil
}

// MTU bounds: 1280 is the IPv6 minimum, 65535 the largest a veth takes.
const (
	minMTU = 1280
	maxMTU = 65535
)
