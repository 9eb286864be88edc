package kovnctl

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	kovnv1 "github.com/kovn/kovn/api/v1alpha1"
)

// bundle writes files into a gzipped tar; what could not be gathered goes to errors.txt, so
// one unreachable piece never costs the rest.
type bundle struct {
	tw     *tar.Writer
	prefix string
	files  []string
	errs   []string
	say    func(format string, a ...any)
}

func (b *bundle) add(name string, data []byte) {
	hdr := &tar.Header{Name: b.prefix + name, Mode: 0o644, Size: int64(len(data)), ModTime: time.Now()}
	if err := b.tw.WriteHeader(hdr); err != nil {
		b.errs = append(b.errs, name+": "+err.Error())
		return
	}
	if _, err := b.tw.Write(data); err != nil {
		b.errs = append(b.errs, name+": "+err.Error())
		return
	}
	b.files = append(b.files, name)
}

func (b *bundle) failed(what string, err error) {
	b.errs = append(b.errs, fmt.Sprintf("%s: %v", what, err))
	b.say("  %s: %v", what, err)
}

// GatherResult names what a bundle holds and what could not be gathered.
type GatherResult struct {
	Files  []string `json:"files"`
	Errors []string `json:"errors,omitempty"`
}

// Gather writes a support bundle to w: kovn's objects and status, the Nodes, kube-system's
// events, every log of kovn's pods (and of their previous containers), the NB and SB
// databases (and IC-NB/IC-SB when interconnected) as JSON, and per node the Open_vSwitch
// database, br-int's OpenFlow tables and ovn-controller's connection.
func Gather(ctx context.Context, c client.Client, e *Execer, w io.Writer, progress io.Writer) (GatherResult, error) {
	zw := gzip.NewWriter(w)
	b := &bundle{tw: tar.NewWriter(zw), prefix: "kovn-gather/",
		say: func(format string, a ...any) { fmt.Fprintf(progress, format+"\n", a...) }}
	b.say("objects and status")
	in := gatherObjects(ctx, c, b)
	b.say("logs of kovn's pods")
	pods := gatherLogs(ctx, e, b)
	b.say("OVN databases")
	gatherOVN(ctx, in, e, b)
	b.say("nodes' OVS")
	for _, p := range pods {
		if p.Labels["app"] == OVSApp && p.Status.Phase == corev1.PodRunning {
			gatherNode(ctx, e, b, p)
		}
	}
	if len(b.errs) > 0 {
		b.add("errors.txt", []byte(strings.Join(b.errs, "\n")+"\n"))
	}
	if err := b.tw.Close(); err != nil {
		return GatherResult{}, err
	}
	return GatherResult{Files: b.files, Errors: b.errs}, zw.Close()
}

// gatherObjects adds kovn's objects, the Nodes, kube-system's events and the status report,
// and returns what the status report read (Collect's one listing serves both).
func gatherObjects(ctx context.Context, c client.Client, b *bundle) *Inputs {
	in, err := Collect(ctx, c)
	if err != nil {
		b.failed("status", err)
	} else {
		var s bytes.Buffer
		PrintStatus(&s, Build(in))
		b.add("status.txt", s.Bytes())
		var ics []kovnv1.InterConnect
		if in.InterConnect != nil {
			ics = append(ics, *in.InterConnect)
		}
		for name, items := range map[string]any{"nodes": in.Nodes, "subnets": in.Subnets, "interconnects": ics, "foreignazs": in.ForeignAZs,
			"bgppeers": in.BgpPeers, "serviceexports": in.Exports, "serviceimports": in.Imports} {
			if y, err := yaml.Marshal(map[string]any{"items": items}); err == nil {
				b.add("objects/"+name+".yaml", y)
			}
		}
	}
	lists := map[string]client.ObjectList{
		"vpcs": &kovnv1.VpcList{}, "ippools": &kovnv1.IPPoolList{}, "ips": &kovnv1.IPList{},
		"providernetworks": &kovnv1.ProviderNetworkList{}, "vlans": &kovnv1.VlanList{},
		"floatingips": &kovnv1.FloatingIPList{}, "egressips": &kovnv1.EgressIPList{},
	}
	for name, l := range lists {
		if err := c.List(ctx, l); err != nil {
			if !meta.IsNoMatchError(err) {
				b.failed("listing "+name, err)
			}
			continue
		}
		if y, err := yaml.Marshal(l); err == nil {
			b.add("objects/"+name+".yaml", y)
		}
	}
	var events corev1.EventList
	if err := c.List(ctx, &events, client.InNamespace(KovnNamespace)); err == nil {
		var s strings.Builder
		for _, ev := range events.Items {
			fmt.Fprintf(&s, "%s %s %s/%s %s: %s\n", ev.LastTimestamp.Format(time.RFC3339), ev.Type, ev.InvolvedObject.Kind,
				ev.InvolvedObject.Name, ev.Reason, ev.Message)
		}
		b.add("events-kube-system.txt", []byte(s.String()))
	} else {
		b.failed("events", err)
	}
	if err != nil {
		return nil
	}
	return &in
}

// gatherLogs adds every container's log of kovn's pods in KovnNamespace and returns the pods.
func gatherLogs(ctx context.Context, e *Execer, b *bundle) []corev1.Pod {
	pods, err := e.Kube.CoreV1().Pods(KovnNamespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		b.failed("listing kube-system's pods", err)
		return nil
	}
	var kovn []corev1.Pod
	for _, p := range pods.Items {
		if !strings.HasPrefix(p.Labels["app"], "kovn-") {
			continue
		}
		kovn = append(kovn, p)
		for _, cs := range p.Status.ContainerStatuses {
			for _, previous := range []bool{false, true} {
				if previous && cs.RestartCount == 0 {
					continue
				}
				raw, err := e.Kube.CoreV1().Pods(KovnNamespace).GetLogs(p.Name, &corev1.PodLogOptions{Container: cs.Name, Previous: previous}).DoRaw(ctx)
				name := fmt.Sprintf("logs/%s/%s.log", p.Name, cs.Name)
				if previous {
					name = fmt.Sprintf("logs/%s/%s.previous.log", p.Name, cs.Name)
				}
				if err != nil {
					b.failed(name, err)
					continue
				}
				b.add(name, raw)
			}
		}
	}
	return kovn
}

// gatherOVN adds NB and SB (and IC-NB/IC-SB when interconnected) as kovn-ovsdb's JSON, and
// northd's status.
func gatherOVN(ctx context.Context, in *Inputs, e *Execer, b *bundle) {
	pod, err := e.CentralPod(ctx)
	if err != nil {
		b.failed("OVN central", err)
		return
	}
	dump := func(file, db, endpoint string) {
		out, err := e.DumpJSON(ctx, pod, CentralContainer, db, endpoint)
		if err != nil {
			b.failed(file, err)
			return
		}
		b.add(file, out)
	}
	dump("ovn/nb-dump.json", "nb", NBSocket)
	dump("ovn/sb-dump.json", "sb", SBSocket)
	if out, err := e.Output(ctx, pod, CentralContainer, "ovn-appctl", "-t", "/var/run/ovn/ovn-northd.ctl", "status"); err != nil {
		b.failed("ovn/northd-status.txt", err)
	} else {
		b.add("ovn/northd-status.txt", []byte(out))
	}
	if in == nil || in.InterConnect == nil {
		return
	}
	ic := in.InterConnect.Spec
	dump("ovn/ic-nb-dump.json", "ic-nb", strings.Join(ic.ICNorthbound, ","))
	dump("ovn/ic-sb-dump.json", "ic-sb", strings.Join(ic.ICSouthbound, ","))
}

// gatherNode adds the node's Open_vSwitch database (kovn-ovsdb's JSON), br-int's OpenFlow
// and datapath flows, its addresses and routes, and ovn-controller's SB connection.
func gatherNode(ctx context.Context, e *Execer, b *bundle, p corev1.Pod) {
	node := p.Spec.NodeName
	if out, err := e.DumpJSON(ctx, p.Name, OVSContainer, "ovs", OVSSocket); err != nil {
		b.failed("nodes/"+node+"/ovs-dump.json", err)
	} else {
		b.add("nodes/"+node+"/ovs-dump.json", out)
	}
	for _, cmd := range []struct {
		file, container string
		argv            []string
	}{
		{"br-int-flows.txt", OVSContainer, []string{"ovs-ofctl", "dump-flows", "br-int"}},
		{"datapath-flows.txt", OVSContainer, []string{"ovs-appctl", "-t", VswitchdCtl, "dpctl/dump-flows"}},
		{"ip-addr.txt", OVSContainer, []string{"ip", "addr"}},
		{"ip-route.txt", OVSContainer, []string{"ip", "route", "show", "table", "all"}},
		{"ovn-controller-connection.txt", OVNControllerContainer, []string{"ovn-appctl", "-t", "ovn-controller", "connection-status"}},
	} {
		name := "nodes/" + node + "/" + cmd.file
		out, err := e.Output(ctx, p.Name, cmd.container, cmd.argv...)
		if err != nil {
			b.failed(name, err)
			continue
		}
		b.add(name, []byte(out))
	}
}
