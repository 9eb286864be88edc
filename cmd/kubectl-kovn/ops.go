package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kovn/kovn/pkg/kovnctl"
)

var errChecksFailed = errors.New("checks failed")

// podExecer is an Execer and the pod that arg, NAMESPACE/POD (or POD in the default
// namespace), names: what trace and tcpdump start from.
func (g *globalFlags) podExecer(ctx context.Context, arg string) (*kovnctl.Execer, *corev1.Pod, error) {
	e, err := g.execer()
	if err != nil {
		return nil, nil, err
	}
	ns, name, ok := strings.Cut(arg, "/")
	if !ok {
		ns, name = "default", arg
	}
	pod, err := e.Kube.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
	return e, pod, err
}

// destination reads IP, IP:PORT or [IPv6]:PORT.
func destination(arg string, port int) (netip.Addr, int, error) {
	if ap, err := netip.ParseAddrPort(arg); err == nil {
		return ap.Addr(), int(ap.Port()), nil
	}
	a, err := netip.ParseAddr(strings.Trim(arg, "[]"))
	if err != nil {
		return netip.Addr{}, 0, fmt.Errorf("destination %q: want IP, IP:PORT or [IPv6]:PORT", arg)
	}
	return a, port, nil
}

func newTrace(g *globalFlags, out io.Writer) *cobra.Command {
	var proto string
	var port int
	var detailed bool
	cmd := &cobra.Command{
		Use:   "trace NAMESPACE/POD DESTINATION[:PORT]",
		Short: "Trace a packet from a pod through OVN's logical pipeline (ovn-trace) and its node's OpenFlow tables (ofproto/trace)",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, cancel := context.WithTimeout(cmd.Context(), time.Minute)
			defer cancel()
			e, pod, err := g.podExecer(ctx, args[0])
			if err != nil {
				return err
			}
			dst, dport, err := destination(args[1], port)
			if err != nil {
				return err
			}
			if proto != "tcp" && proto != "udp" && proto != "icmp" {
				return fmt.Errorf("--protocol %q: tcp, udp or icmp", proto)
			}
			r, err := kovnctl.Trace(ctx, e, pod, dst, proto, dport, detailed)
			if err != nil {
				return err
			}
			if g.output == "json" {
				return writeJSON(out, r)
			}
			kovnctl.PrintTrace(out, r, detailed)
			return nil
		},
	}
	cmd.Flags().StringVarP(&proto, "protocol", "p", "tcp", "tcp, udp or icmp")
	cmd.Flags().IntVar(&port, "port", 80, "destination port when DESTINATION has none")
	cmd.Flags().BoolVar(&detailed, "detailed", false, "every logical and OpenFlow stage, not only the summary and the datapath actions")
	return cmd
}

func newTcpdump(g *globalFlags, out io.Writer) *cobra.Command {
	var count int
	var write string
	cmd := &cobra.Command{
		Use:   "tcpdump NAMESPACE/POD [-- TCPDUMP FILTER...]",
		Short: "Capture a pod's traffic on its node, at the host end of its interface",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt)
			defer stop()
			e, pod, err := g.podExecer(ctx, args[0])
			if err != nil {
				return err
			}
			end, err := kovnctl.PodEndOf(pod)
			if err != nil {
				return err
			}
			iface, err := e.HostInterface(ctx, end.Node, end.Port)
			if err != nil {
				return err
			}
			ovs, err := e.NodePod(ctx, kovnctl.OVSApp, end.Node)
			if err != nil {
				return err
			}
			// -Z root: the image has no tcpdump user to drop privileges to.
			argv := []string{"tcpdump", "-i", iface, "-nn", "-l", "-Z", "root"}
			if count > 0 {
				argv = append(argv, "-c", strconv.Itoa(count))
			}
			sink := out
			if write != "" {
				f, err := os.Create(write)
				if err != nil {
					return err
				}
				defer f.Close()
				argv, sink = append(argv, "-U", "-w", "-"), f
			}
			fmt.Fprintf(os.Stderr, "capturing on %s (%s/%s) on node %s\n", iface, pod.Namespace, pod.Name, end.Node)
			err = e.Run(ctx, ovs, kovnctl.OVSContainer, append(argv, args[1:]...), sink)
			if ctx.Err() != nil {
				return nil // interrupted: the capture so far is the result
			}
			return err
		},
	}
	cmd.Flags().IntVarP(&count, "count", "c", 0, "stop after this many packets (0: until interrupted)")
	cmd.Flags().StringVarP(&write, "write", "w", "", "write a pcap file here instead of printing packets")
	return cmd
}

func newGather(g *globalFlags, out io.Writer) *cobra.Command {
	var dir string
	cmd := &cobra.Command{
		Use:   "gather",
		Short: "Write a support bundle: kovn's objects, status and logs, the OVN databases, each node's OVS state",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			e, err := g.execer()
			if err != nil {
				return err
			}
			c, err := g.client()
			if err != nil {
				return err
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), 10*time.Minute)
			defer cancel()
			path := filepath.Join(dir, "kovn-gather-"+time.Now().UTC().Format("20060102-150405")+".tar.gz")
			f, err := os.Create(path)
			if err != nil {
				return err
			}
			defer f.Close()
			r, err := kovnctl.Gather(ctx, c, e, f, os.Stderr)
			if err != nil {
				return err
			}
			if g.output == "json" {
				return writeJSON(out, struct {
					Path string `json:"path"`
					kovnctl.GatherResult
				}{path, r})
			}
			fmt.Fprintf(out, "%s: %d files, %d not gathered (errors.txt)\n", path, len(r.Files), len(r.Errors))
			return nil
		},
	}
	cmd.Flags().StringVarP(&dir, "dir", "d", ".", "where to write kovn-gather-<time>.tar.gz")
	return cmd
}

func newDiagnose(g *globalFlags, out io.Writer) *cobra.Command {
	return &cobra.Command{
		Use:   "diagnose",
		Short: "Check kovn's status, OVN central and every node's OVS, ovn-controller, tunnels and ovn0: each check with its reason and fix",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			e, err := g.execer()
			if err != nil {
				return err
			}
			c, err := g.client()
			if err != nil {
				return err
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), 5*time.Minute)
			defer cancel()
			checks, err := kovnctl.Diagnose(ctx, c, e)
			if err != nil {
				return err
			}
			if g.output == "json" {
				err = writeJSON(out, checks)
			} else {
				kovnctl.PrintChecks(out, checks)
			}
			if err != nil {
				return err
			}
			for _, c := range checks {
				if !c.OK {
					return errChecksFailed
				}
			}
			return nil
		},
	}
}

func writeJSON(out io.Writer, v any) error {
	enc := json.NewEncoder(out)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
