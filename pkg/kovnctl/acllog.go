package kovnctl

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ACL logs: ovn-controller writes a line for each packet a logged ACL hits (acl_log module,
// INFO, to its container's output in the chart), rate-limited by kovn's ACL log meter. OVN
// evaluates ACLs on every packet of a connection's original direction (only replies take the
// established fast path), so an allowed connection logs each of its packets that way.
// kubectl-kovn reads those lines from every node's ovn-controller container through the API
// server and names the policy, the rule and the pods.

// ACLLogEntry is one ACL log line, readable.
type ACLLogEntry struct {
	Time      string `json:"time"`
	Node      string `json:"node"`
	Verdict   string `json:"verdict"` // allow | drop | reject
	Severity  string `json:"severity"`
	Direction string `json:"direction,omitempty"` // to-lport | from-lport, when OVN says
	// Kind is NetworkPolicy or Subnet; Namespace/Name the policy, or Name the Subnet; Rule
	// the ACL within it (ingress/deny, egress/0/ip4, acl/2).
	Kind      string      `json:"kind"`
	Namespace string      `json:"namespace,omitempty"`
	Name      string      `json:"name"`
	Rule      string      `json:"rule"`
	Protocol  string      `json:"protocol"`
	Source    ACLEndpoint `json:"source"`
	Dest      ACLEndpoint `json:"destination"`
	// ICMP is "type/code" for ICMP and ICMPv6 packets.
	ICMP string `json:"icmp,omitempty"`
	// TCPFlags are a TCP packet's flags as OVS prints them: syn, ack, fin|ack...
	TCPFlags string `json:"tcpFlags,omitempty"`
}

// ACLEndpoint is one end of a logged packet: its address, port (TCP, UDP, SCTP) and the pod
// holding the address, when one does.
type ACLEndpoint struct {
	IP   string `json:"ip"`
	Port int    `json:"port,omitempty"`
	Pod  string `json:"pod,omitempty"` // namespace/name
}

// ParseACLLogLine reads an acl_log line of ovn-controller, e.g.
//
//	2026-11-27T05:00:00Z|00012|acl_log(ovn_pinctrl0)|INFO|name="ns/deny:ingress/deny", verdict=drop, severity=alert, direction=to-lport: icmp,vlan_tci=0x0000,dl_src=…,nw_src=10.16.0.5,nw_dst=10.16.0.6,…,icmp_type=8,icmp_code=0
//
// and reports whether it is one.
func ParseACLLogLine(line string) (ACLLogEntry, bool) {
	parts := strings.SplitN(line, "|", 5)
	if len(parts) != 5 || !strings.HasPrefix(parts[2], "acl_log") {
		return ACLLogEntry{}, false
	}
	e := ACLLogEntry{Time: parts[0]}
	rest, ok := strings.CutPrefix(parts[4], "name=")
	if !ok {
		return ACLLogEntry{}, false
	}
	// The name is a JSON string; what follows it is ", k=v, k=v: flow".
	dec := json.NewDecoder(strings.NewReader(rest))
	var name string
	if err := dec.Decode(&name); err != nil {
		return ACLLogEntry{}, false
	}
	rest = rest[dec.InputOffset():]
	head, flow, ok := strings.Cut(rest, ": ")
	if !ok {
		return ACLLogEntry{}, false
	}
	for _, kv := range strings.Split(head, ",") {
		k, v, _ := strings.Cut(strings.TrimSpace(kv), "=")
		switch k {
		case "verdict":
			e.Verdict = v
		case "severity":
			e.Severity = v
		case "direction":
			e.Direction = v
		}
	}
	e.Kind, e.Namespace, e.Name, e.Rule = aclOwner(name)
	e.parseFlow(flow)
	return e, true
}

// aclOwner splits an ACL name kovn wrote: "<namespace>/<policy>:<rule>" (a NetworkPolicy's) or
// "<subnet>:<rule>" (a Subnet's; Subnet names hold no slash). Names over 63 bytes were cut
// and end in a hash.
func aclOwner(name string) (kind, ns, owner, rule string) {
	owner, rule, _ = strings.Cut(name, ":")
	if n, p, ok := strings.Cut(owner, "/"); ok {
		return "NetworkPolicy", n, p, rule
	}
	return "Subnet", "", owner, rule
}

// parseFlow reads OVS's flow_format text: the protocol name first, then key=value fields.
func (e *ACLLogEntry) parseFlow(flow string) {
	fields := strings.Split(strings.TrimSpace(flow), ",")
	e.Protocol = fields[0]
	var icmpType, icmpCode string
	for _, f := range fields[1:] {
		k, v, _ := strings.Cut(f, "=")
		switch k {
		case "nw_src", "ipv6_src":
			e.Source.IP = v
		case "nw_dst", "ipv6_dst":
			e.Dest.IP = v
		case "tp_src":
			e.Source.Port, _ = strconv.Atoi(v)
		case "tp_dst":
			e.Dest.Port, _ = strconv.Atoi(v)
		case "icmp_type", "icmpv6_type":
			icmpType = v
		case "icmp_code", "icmpv6_code":
			icmpCode = v
		case "tcp_flags":
			e.TCPFlags = v
		}
	}
	if icmpType != "" {
		e.ICMP = icmpType + "/" + icmpCode
	}
}

// ACLLogOptions choose the lines ReadACLLog returns.
type ACLLogOptions struct {
	// Namespace keeps the lines of its policies and of packets from or to its pods ("": all).
	Namespace string
	Follow    bool
	// Since keeps lines written at most this long ago (0: every line the containers kept).
	Since time.Duration
	// Files, when set, are ovn-controller log files to read instead of the chart's
	// containers, by node (OVN run as a host service, or the lab's process install).
	Files map[string]string
}

// ReadACLLog reads the ACL log lines of every node's ovn-controller and calls emit with each
// (from one goroutine at a time). Without Follow it returns once every node's log was read;
// with Follow when ctx ends. A node whose log cannot be read is reported to warn.
func (e *Execer) ReadACLLog(ctx context.Context, opts ACLLogOptions, emit func(ACLLogEntry), warn func(error)) error {
	sources := map[string]func(context.Context, func(ACLLogEntry)) error{}
	for node, path := range opts.Files {
		sources[node] = func(ctx context.Context, emit func(ACLLogEntry)) error {
			return readACLLogFile(ctx, path, node, opts, emit)
		}
	}
	if len(opts.Files) == 0 {
		pods, err := e.Kube.CoreV1().Pods(KovnNamespace).List(ctx, metav1.ListOptions{LabelSelector: "app=" + OVSApp})
		if err != nil {
			return err
		}
		if len(pods.Items) == 0 {
			return fmt.Errorf("no %s pods: ACL logs are read from the ovn-controller containers of kovn's chart (--log-file reads files)", OVSApp)
		}
		for _, p := range pods.Items {
			sources[p.Spec.NodeName] = func(ctx context.Context, emit func(ACLLogEntry)) error {
				return e.readNodeACLLog(ctx, p, opts, emit)
			}
		}
	}
	names := newPodNames(e)
	var mu sync.Mutex
	var wg sync.WaitGroup
	for node, read := range sources {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := read(ctx, func(le ACLLogEntry) {
				mu.Lock()
				defer mu.Unlock()
				le.Source.Pod, le.Dest.Pod = names.of(ctx, le.Source.IP), names.of(ctx, le.Dest.IP)
				if opts.Namespace == "" || le.Namespace == opts.Namespace || inNamespace(le.Source.Pod, opts.Namespace) ||
					inNamespace(le.Dest.Pod, opts.Namespace) {
					emit(le)
				}
			})
			if err != nil && ctx.Err() == nil {
				mu.Lock()
				warn(fmt.Errorf("node %s: %w", node, err))
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return nil
}

func inNamespace(pod, ns string) bool { return strings.HasPrefix(pod, ns+"/") }

func (e *Execer) readNodeACLLog(ctx context.Context, p corev1.Pod, opts ACLLogOptions, emit func(ACLLogEntry)) error {
	lo := &corev1.PodLogOptions{Container: OVNControllerContainer, Follow: opts.Follow}
	if opts.Since > 0 {
		secs := int64((opts.Since + time.Second - 1) / time.Second)
		lo.SinceSeconds = &secs
	}
	stream, err := e.Kube.CoreV1().Pods(KovnNamespace).GetLogs(p.Name, lo).Stream(ctx)
	if err != nil {
		return err
	}
	defer stream.Close()
	return scanACLLog(stream, p.Spec.NodeName, emit)
}

// readACLLogFile reads an ovn-controller log file; following, it polls for new lines (a file
// that is rotated is not reopened). Since compares with each line's own time.
func readACLLogFile(ctx context.Context, path, node string, opts ACLLogOptions, emit func(ACLLogEntry)) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	var after time.Time
	if opts.Since > 0 {
		after = time.Now().Add(-opts.Since).Truncate(time.Second)
	}
	keep := func(le ACLLogEntry) {
		if t, err := time.Parse(time.RFC3339, le.Time); err != nil || !t.Before(after) {
			emit(le)
		}
	}
	br := bufio.NewReader(f)
	var partial string
	for {
		line, err := br.ReadString('\n')
		partial += line
		if err == nil {
			if le, ok := ParseACLLogLine(strings.TrimRight(partial, "\n")); ok {
				le.Node = node
				keep(le)
			}
			partial = ""
			continue
		}
		if err != io.EOF {
			return err
		}
		if !opts.Follow {
			return nil
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(500 * time.Millisecond):
		}
	}
}

func scanACLLog(r io.Reader, node string, emit func(ACLLogEntry)) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		if le, ok := ParseACLLogLine(sc.Text()); ok {
			le.Node = node
			emit(le)
		}
	}
	return sc.Err()
}

// podNames maps pod addresses to namespace/name, listing pods again (at most every 5 s) when
// an address is unknown: a pod created after the first listing is named too.
type podNames struct {
	e      *Execer
	byIP   map[string]string
	listed time.Time
}

func newPodNames(e *Execer) *podNames { return &podNames{e: e, byIP: map[string]string{}} }

func (n *podNames) of(ctx context.Context, ip string) string {
	if ip == "" {
		return ""
	}
	if name, ok := n.byIP[ip]; ok || time.Since(n.listed) < 5*time.Second {
		return name
	}
	n.listed = time.Now()
	pods, err := n.e.Kube.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return ""
	}
	for _, p := range pods.Items {
		if p.Spec.HostNetwork {
			continue
		}
		for _, a := range p.Status.PodIPs {
			n.byIP[a.IP] = p.Namespace + "/" + p.Name
		}
	}
	return n.byIP[ip]
}

// ACLLogFormat lays out acl-log's columns: time, node, verdict, ACL, protocol.
const ACLLogFormat = "%-20s %-8s %-7s %-52s %-12s"

// FormatACLLogEntry is one line for people: time, node, verdict, what logged it, protocol and
// both ends (pod and address:port).
func FormatACLLogEntry(le ACLLogEntry) string {
	what := le.Kind + " " + le.Name
	if le.Namespace != "" {
		what = le.Kind + " " + le.Namespace + "/" + le.Name
	}
	proto := le.Protocol
	if le.ICMP != "" {
		proto += " " + le.ICMP
	}
	if le.TCPFlags != "" {
		proto += " " + le.TCPFlags
	}
	return fmt.Sprintf(ACLLogFormat+" %s -> %s\n", le.Time, le.Node, le.Verdict, what+" "+le.Rule, proto,
		endpoint(le.Source), endpoint(le.Dest))
}

func endpoint(ep ACLEndpoint) string {
	addr := ep.IP
	if ep.Port != 0 {
		if strings.Contains(addr, ":") {
			addr = "[" + addr + "]"
		}
		addr += ":" + strconv.Itoa(ep.Port)
	}
	if ep.Pod != "" {
		return ep.Pod + " (" + addr + ")"
	}
	return addr
}
