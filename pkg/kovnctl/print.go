package kovnctl

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/kovn/kovn/pkg/kovnctl/probe"
)

// PrintStatus writes the report for people: the problems first (what is wrong, then what to
// do), then each part as a table.
func PrintStatus(w io.Writer, r Report) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	defer tw.Flush()
	fmt.Fprintln(tw, r.Summary())
	for _, p := range r.Problems {
		fmt.Fprintf(tw, "  ✗ %s: %s\n", p.Object, p.Fault)
		if p.Fix != "" {
			fmt.Fprintf(tw, "      fix: %s\n", p.Fix)
		}
	}
	fmt.Fprintf(tw, "\nCONTROLLER\tLEADER\tRENEWED\n")
	fmt.Fprintf(tw, "kovn-controller\t%s\t%s ago\n", dash(r.Controller.Leader), dash(r.Controller.RenewedAgo))
	fmt.Fprintf(tw, "\nNODE\tKUBELET\tKOVN NETWORK\tREASON\n")
	for _, n := range r.Nodes {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", n.Name, n.Kubelet, n.Network, n.Reason)
	}
	fmt.Fprintf(tw, "\nSUBNET\tCIDR\tUSED v4/v6\tFREE v4\tREADY\n")
	for _, s := range r.Subnets {
		fmt.Fprintf(tw, "%s\t%s\t%d/%d\t%d\t%s\n", s.Name, s.CIDR, s.V4Used, s.V6Used, s.V4Free, s.Ready)
	}
	if ic := r.Interconnect; ic != nil {
		fmt.Fprintf(tw, "\nINTERCONNECT AZ\tREADY\tGATEWAYS (ACTIVE)\tADVERTISED\n")
		fmt.Fprintf(tw, "%s\t%s\t%s (%s)\t%s\n", ic.AZ, ic.Ready, list(ic.Gateways), list(ic.ActiveGateways), list(ic.Advertised))
		fmt.Fprintf(tw, "\nREMOTE AZ\tGATEWAYS\tROUTES LEARNED\n")
		for _, p := range ic.Peers {
			fmt.Fprintf(tw, "%s\t%s\t%s\n", p.AZ, list(p.Gateways), list(p.Routes))
		}
	}
	if len(r.ForeignAZs) > 0 {
		fmt.Fprintf(tw, "\nFOREIGN AZ\tREADY\tADVERTISED\tLEARNED\tREFUSED\n")
		for _, f := range r.ForeignAZs {
			fmt.Fprintf(tw, "%s (%s)\t%s\t%s\t%s\t%s\n", f.AZ, f.Name, f.Ready, list(f.Advertised), list(f.Learned), list(f.Refused))
		}
	}
	if len(r.Exports)+len(r.Imports) > 0 {
		fmt.Fprintf(tw, "\nSERVICEEXPORT\tSTATE\tWHY\n")
		for _, e := range r.Exports {
			fmt.Fprintf(tw, "%s\t%s\t%s\n", e.Name, e.State, e.Why)
		}
		fmt.Fprintf(tw, "\nSERVICEIMPORT\tTYPE\tIPS\tCLUSTERS\n")
		for _, i := range r.Imports {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", i.Name, i.Type, list(i.IPs), list(i.Clusters))
		}
	}
	if len(r.Central) > 0 {
		fmt.Fprintf(tw, "\nOVN CENTRAL DB\tNODE\tUP\tROLE\tTERM\tREACHES\tLEADER\n")
		for _, m := range r.Central {
			reaches := "-"
			if m.Members > 0 {
				reaches = fmt.Sprintf("%d/%d", m.Connected, m.Members)
			}
			fmt.Fprintf(tw, "%s\t%s\t%t\t%s\t%d\t%s\t%s\n", m.DB, m.Node, m.Up, dash(m.Role), m.Term, reaches, dash(m.Leader))
		}
	}
	if len(r.LossyPaths) > 0 {
		fmt.Fprintf(tw, "\nLOSSY PATH (kovn-pinger)\tTARGET\tFAMILY\tLOST/SENT\n")
		for _, p := range r.LossyPaths {
			fmt.Fprintf(tw, "%s -> %s\t%s\t%s\t%g/%g\n", p.Source, p.Kind, p.Target, dash(p.Family), p.Lost, p.Sent)
		}
	}
	if len(r.BGP) > 0 {
		fmt.Fprintf(tw, "\nBGP PEER\tNODE\tSTATE\tSENT\tRECEIVED\tERROR\n")
		for _, b := range r.BGP {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%s\n", b.Peer, b.Node, b.State, b.Sent, b.Received, b.Error)
		}
	}
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func list(s []string) string {
	if len(s) == 0 {
		return "-"
	}
	return strings.Join(s, ",")
}

// PrintResults writes the connectivity test as a pass/fail table, the failures first.
func PrintResults(w io.Writer, results []probe.Result) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	defer tw.Flush()
	failed := 0
	for _, r := range results {
		if !r.OK {
			failed++
		}
	}
	if failed == 0 {
		fmt.Fprintf(tw, "all %d checks passed\n\n", len(results))
	} else {
		fmt.Fprintf(tw, "%d of %d checks failed\n\n", failed, len(results))
	}
	fmt.Fprintf(tw, "RESULT\tFROM\tCHECK\tTO\tDETAIL\n")
	for _, pass := range []bool{false, true} {
		for _, r := range results {
			if r.OK == pass {
				word := "FAIL"
				if r.OK {
					word = "pass"
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", word, r.From, r.Check, r.To, r.Detail)
			}
		}
	}
}

// PrintChecks writes diagnose's checks as a table, the failures first with their fixes.
func PrintChecks(w io.Writer, checks []Check) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	defer tw.Flush()
	failed := 0
	for _, c := range checks {
		if !c.OK {
			failed++
		}
	}
	if failed == 0 {
		fmt.Fprintf(tw, "all %d checks passed\n\n", len(checks))
	} else {
		fmt.Fprintf(tw, "%d of %d checks failed\n\n", failed, len(checks))
	}
	fmt.Fprintf(tw, "RESULT\tOBJECT\tCHECK\tDETAIL\n")
	for _, pass := range []bool{false, true} {
		for _, c := range checks {
			if c.OK != pass {
				continue
			}
			word := "FAIL"
			if c.OK {
				word = "pass"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", word, c.Object, c.Check, oneLine(c.Detail))
			if c.Fix != "" {
				fmt.Fprintf(tw, "\t\t  fix:\t%s\n", c.Fix)
			}
		}
	}
}

// PrintTrace writes a trace: the packet, OVN's logical pipeline, the node's OpenFlow
// pipeline (the datapath actions only, unless detailed), and the verdict.
func PrintTrace(w io.Writer, r TraceResult, detailed bool) {
	p := r.Packet
	what := p.Proto
	if p.Proto != "icmp" {
		what = fmt.Sprintf("%s %d -> %d", p.Proto, SrcPort, p.DstPort)
	}
	fmt.Fprintf(w, "packet: %s (%s, port %s on %s) -> %s, %s\n", p.SrcIP, p.SrcMAC, p.Port, r.Node, p.DstIP, what)
	if r.Service != "" {
		fmt.Fprintf(w, "service: %s\n", r.Service)
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "== OVN logical pipeline (ovn-trace %s) ==\n%s\n", p.Switch, strings.TrimRight(r.Logical, "\n"))
	fmt.Fprintf(w, "\n== OpenFlow on %s (ofproto/trace br-int, in_port %s) ==\n", r.Node, r.Iface)
	if detailed {
		fmt.Fprintln(w, strings.TrimRight(r.Physical, "\n"))
	} else {
		for _, l := range strings.Split(r.Physical, "\n") {
			if strings.HasPrefix(l, "Datapath actions:") || strings.HasPrefix(l, "Final flow:") {
				fmt.Fprintln(w, l)
			}
		}
	}
	fmt.Fprintf(w, "\nverdict: %s\n", r.Verdict)
}

// oneLine keeps a table row on one line: a tool's multi-line error joined with " | ".
func oneLine(s string) string {
	return strings.Join(strings.Fields(strings.ReplaceAll(strings.TrimSpace(s), "\n", " | ")), " ")
}
