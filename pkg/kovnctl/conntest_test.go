package kovnctl

import (
	"fmt"
	"strings"
	"testing"

	"github.com/kovn/kovn/pkg/kovnctl/probe"
)

func TestPlan(t *testing.T) {
	views := []ClusterView{
		{Name: "c1", MCS: true, ClientNodes: []string{"n1", "n2"}, ServiceIPs: []string{"10.96.0.5", "fd00::5"},
			ClusterSetIPs: []string{"10.250.0.1"},
			Servers: []ServerPod{{Name: "server-n1", Node: "n1", IPs: []string{"10.16.0.2", "fd00:16::2"}},
				{Name: "server-n2", Node: "n2", IPs: []string{"10.16.0.3", "fd00:16::3"}}}},
		{Name: "c2", MCS: true, ClientNodes: []string{"m1"}, ServiceIPs: []string{"10.97.0.5"}, ClusterSetIPs: []string{"10.250.0.1"},
			Servers: []ServerPod{{Name: "server-m1", Node: "m1", IPs: []string{"10.17.0.2"}}}},
	}
	plan := Plan(views)
	count := func(ts []probe.Target) map[string]int {
		m := map[string]int{}
		for _, t := range ts {
			m[t.Check]++
		}
		return m
	}
	got := fmt.Sprint(count(plan["c1"]["n1"]))
	want := "map[DNS:1 DNS (clusterset):1 pod-to-ClusterSetIP:1 pod-to-Service:2 pod-to-pod (cross-cluster):1 pod-to-pod (other node):2 pod-to-pod (same node):2]"
	if got != want {
		t.Errorf("c1/n1 checks %s, want %s", got, want)
	}
	for _, tg := range plan["c1"]["n2"] {
		switch {
		case tg.Check == "pod-to-pod (same node)" && !strings.HasPrefix(tg.To, "c1/server-n2 "):
			t.Errorf("n2's same-node check goes to %s", tg.To)
		case tg.Check == "pod-to-Service" && strings.Join(tg.Expect, ",") != "c1/server-n1,c1/server-n2":
			t.Errorf("the Service check expects %v: only this cluster's servers back it", tg.Expect)
		case tg.Check == "pod-to-ClusterSetIP" && (strings.Join(tg.EachCluster, ",") != "c1,c2" || len(tg.Expect) != 3):
			t.Errorf("the ClusterSetIP check: each of %v, any of %v", tg.EachCluster, tg.Expect)
		case tg.Check == "pod-to-pod (other node)" && tg.URL != "http://10.16.0.2:8080/" && tg.URL != "http://[fd00:16::2]:8080/":
			t.Errorf("other-node URL %s", tg.URL)
		}
	}
	views[0].MCS = false
	if c := count(Plan(views)["c1"]["n1"]); c["pod-to-ClusterSetIP"]+c["DNS (clusterset)"] != 0 {
		t.Errorf("MCS checks without MCS: %v", c)
	}
}
