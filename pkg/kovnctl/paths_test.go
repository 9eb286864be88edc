package kovnctl

import (
	"slices"
	"strings"
	"testing"
)

// A pinger's metrics as it serves them: lossyPaths keeps the paths whose gauge is 1, with
// their counters.
func TestLossyPaths(t *testing.T) {
	raw := []byte(`# HELP kovn_pinger_path_lossy 1 when the last two rounds each lost a probe of the path, else 0
# TYPE kovn_pinger_path_lossy gauge
kovn_pinger_path_lossy{family="ipv4",kind="pod",source="c1-n1",target="c1-n2"} 1
kovn_pinger_path_lossy{family="ipv4",kind="pod",source="c1-n1",target="c1-n3"} 0
kovn_pinger_path_lossy{family="",kind="dns",source="c1-n1",target="kubernetes.default.svc.cluster.local"} 0
# TYPE kovn_pinger_lost_total counter
kovn_pinger_lost_total{family="ipv4",kind="pod",source="c1-n1",target="c1-n2"} 6
kovn_pinger_lost_total{family="ipv4",kind="pod",source="c1-n1",target="c1-n3"} 0
# TYPE kovn_pinger_probes_total counter
kovn_pinger_probes_total{family="ipv4",kind="pod",source="c1-n1",target="c1-n2"} 30
kovn_pinger_probes_total{family="ipv4",kind="pod",source="c1-n1",target="c1-n3"} 30
`)
	got, err := lossyPaths(raw)
	if err != nil {
		t.Fatal(err)
	}
	want := PathStatus{Source: "c1-n1", Kind: "pod", Target: "c1-n2", Family: "ipv4", Lost: 6, Sent: 30}
	if len(got) != 1 || got[0] != want {
		t.Errorf("lossy paths %+v, want [%+v]", got, want)
	}
}

// A lossy path is a problem on the status screen, named by source and target.
func TestLossyPathIsAProblem(t *testing.T) {
	r := Build(Inputs{Pingers: PingerScrape{Answered: 3, Silent: []string{"c1-n3"},
		Lossy: []PathStatus{{Source: "c1-n1", Kind: "pod", Target: "c1-n2", Family: "ipv4", Lost: 6, Sent: 30}}}})
	var found bool
	for _, p := range r.Problems {
		if p.Object == "path/c1-n1->pod/c1-n2" && strings.Contains(p.Fault, "from c1-n1 to the pinger pod on c1-n2 (ipv4) loses probes (6 of 30") {
			found = true
		}
	}
	if !found || r.Pingers != 3 || !slices.Contains(r.SilentPingers, "c1-n3") || r.Problems[1].Object != "pinger/c1-n3" {
		t.Errorf("problems %+v, pingers %d", r.Problems, r.Pingers)
	}
}
