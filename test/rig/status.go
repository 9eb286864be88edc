package rig

import (
	"context"
	"fmt"
	"os/exec"
	"sort"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Health is one line of `kovn-rig status`.
type Health struct {
	What   string
	OK     bool
	Detail string
}

// Status checks every recorded process and, per cluster, the apiserver, the registered nodes
// and the chassis in the SB database.
func (s *State) Status(ctx context.Context) []Health {
	var out []Health
	for _, p := range s.AllProcs() {
		h := Health{What: p.Name, OK: Alive(p.Pid), Detail: fmt.Sprintf("pid %d", p.Pid)}
		if !h.OK {
			h.Detail += " not running (log: " + p.Log + ")"
		}
		out = append(out, h)
	}
	for _, ci := range s.Clusters {
		out = append(out, s.nodeHealth(ctx, ci), chassisHealth(ci))
	}
	if s.Config.ForeignAZ {
		out = append(out, s.foreignAZHealth(ctx))
	}
	return out
}

// foreignAZHealth says whether the foreign AZ is joined: its Availability_Zone in IC-SB and the
// routes it advertises there (none after RemoveForeignAZ, which makes it unhealthy on purpose).
func (s *State) foreignAZHealth(ctx context.Context) Health {
	h := Health{What: ForeignAZName + "/ic"}
	sbctl := func(args ...string) (string, error) {
		argv := append([]string{"--db=" + s.Config.ICSBLocal(), "--timeout=5", "--no-leader-only", "--bare"}, args...)
		out, err := exec.CommandContext(ctx, "ovn-ic-sbctl", argv...).CombinedOutput()
		if err != nil {
			return "", fmt.Errorf("ovn-ic-sbctl: %v: %s", err, out)
		}
		return strings.TrimSpace(string(out)), nil
	}
	az, err := sbctl("--columns=_uuid", "find", "Availability_Zone", "name="+ForeignAZName)
	if err == nil && az == "" {
		err = fmt.Errorf("no Availability_Zone %s in IC-SB", ForeignAZName)
	}
	var routes string
	if err == nil {
		routes, err = sbctl("--columns=ip_prefix", "find", "Route", "availability_zone="+az)
	}
	if err != nil {
		h.Detail = err.Error()
		return h
	}
	h.OK = true
	h.Detail = fmt.Sprintf("AZ in IC-SB, advertising %s", strings.Join(strings.Fields(routes), " "))
	return h
}

func (s *State) nodeHealth(ctx context.Context, ci ClusterInfo) Health {
	h := Health{What: ci.Name + "/nodes"}
	kc, err := s.Kube(ci.Name)
	if err != nil {
		h.Detail = err.Error()
		return h
	}
	nodes, err := kc.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		h.Detail = "apiserver: " + err.Error()
		return h
	}
	var names []string
	fake, fakeReady := 0, 0
	for i := range nodes.Items {
		n := &nodes.Items[i]
		if n.Labels[FakeNodeLabel] == "true" { // hundreds of them: counted, not listed
			fake++
			if nodeReady(n) {
				fakeReady++
			}
			continue
		}
		ready := map[bool]string{true: "Ready", false: "NotReady"}[nodeReady(n)]
		names = append(names, n.Name+"("+ready+")")
	}
	sort.Strings(names)
	h.OK = len(names) == len(ci.Nodes) && fake == ci.FakeNodes
	if s.Config.Kovn { // with a CNI installed, a node that is not Ready is not healthy
		h.OK = h.OK && allReady(nodes.Items)
	}
	h.Detail = fmt.Sprintf("%d/%d registered: %s", len(names), len(ci.Nodes), strings.Join(names, " "))
	if ci.FakeNodes > 0 {
		h.Detail += fmt.Sprintf("; fake nodes %d/%d registered, %d Ready", fake, ci.FakeNodes, fakeReady)
	}
	return h
}

// Chassis lists the chassis names in a cluster's SB database.
func Chassis(ci ClusterInfo) ([]string, error) {
	out, err := exec.Command("ovn-sbctl", "--db="+ci.SBAddr, "--timeout=5", "--bare", "--columns=name", "list", "Chassis").CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("ovn-sbctl: %v: %s", err, out)
	}
	names := strings.Fields(string(out))
	sort.Strings(names)
	return names, nil
}

func chassisHealth(ci ClusterInfo) Health {
	h := Health{What: ci.Name + "/chassis"}
	names, err := Chassis(ci)
	if err != nil {
		h.Detail = err.Error()
		return h
	}
	h.OK = len(names) == len(ci.Nodes)
	h.Detail = fmt.Sprintf("%d/%d in SB: %s", len(names), len(ci.Nodes), strings.Join(names, " "))
	return h
}

// Env returns the shell exports to use kubectl / ovn-nbctl against one cluster.
func (s *State) Env(cluster string) (string, error) {
	for _, ci := range s.Clusters {
		if ci.Name == cluster {
			lines := []string{
				"export KUBECONFIG=" + ci.Kubeconfig,
				"export OVN_NB_DB=" + ci.NBAddr,
				"export OVN_SB_DB=" + ci.SBAddr,
				"export PATH=" + s.Config.K8sBinDir + ":$PATH",
			}
			if s.Config.Interconnected() {
				lines = append(lines, "export OVN_IC_NB_DB="+s.Config.ICNBLocal(), "export OVN_IC_SB_DB="+s.Config.ICSBLocal(),
					"# the IC databases as the clusters reach them (mutual TLS), for an InterConnect's icNorthbound/icSouthbound",
					"export KOVN_IC_NB="+s.Config.ICNBEndpoint(), "export KOVN_IC_SB="+s.Config.ICSBEndpoint(),
					"# kovn's clusterset store (OVN_ClusterSet) is served by the IC-SB server(s): ovsdb-client dump $OVN_IC_SB_DB OVN_ClusterSet")
			}
			if s.Config.ForeignAZ {
				lines = append(lines, "# the foreign AZ "+ForeignAZName+" (OVN that kovn does not manage) and its VMs' namespaces",
					"export KOVN_FOREIGN_NB="+s.Config.ForeignNBDB()+" KOVN_FOREIGN_SB="+s.Config.ForeignSBDB()+
						" KOVN_FOREIGN_VM1_NS="+s.Config.ForeignVMNS(1)+" KOVN_FOREIGN_VM2_NS="+s.Config.ForeignVMNS(2),
					"# ovn-nbctl --db=$KOVN_FOREIGN_NB lr-route-list "+ForeignRouter+"; ip netns exec $KOVN_FOREIGN_VM1_NS ping "+ForeignVM2IP.String())
			}
			lines = append(lines, "# the ToR's FRR (BGP peer of kovn-speaker) and the outside host behind it",
				"export KOVN_TOR_NS="+s.Config.ToRNS()+" KOVN_TOR_VTY="+s.Config.torVtyDir()+" KOVN_OUTSIDE_NS="+s.Config.OutsideNS(),
				"# ip netns exec $KOVN_TOR_NS vtysh --vty_socket $KOVN_TOR_VTY -c 'show bgp summary'",
				"# the underlay: nodes' eth1 trunks on br-vfab (userspace OVS in the fabric namespace), the physical router (VLAN gateways) and the host on VLAN 30",
				"export KOVN_PHYS_ROUTER_NS="+s.Config.PhysRouterNS()+" KOVN_UNDERLAY_HOST_NS="+s.Config.UnderlayHostNS()+" KOVN_FABRIC_NS="+s.Config.FabricNS(),
				"# ip netns exec $KOVN_FABRIC_NS ovs-vsctl --db="+s.Config.UnderlaySwitchDB()+" show; ovs-appctl -t "+s.Config.UnderlaySwitchCtl()+" fdb/show br-vfab")
			return strings.Join(lines, "\n") + "\n", nil
		}
	}
	return "", fmt.Errorf("no cluster %q in this rig (have %d clusters: c1..c%d)", cluster, len(s.Clusters), len(s.Clusters))
}
