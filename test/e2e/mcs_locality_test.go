package e2e

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// mcsLocality: Service near exported from c1 and c2 with mcs.kovn.io/locality=local-first. A
// client in c1 (be1) gets c1's endpoint only, 20 of 20; c3, which exports nothing, spreads over
// both. c1's endpoint leaves (its label removed, as a scale to 0 does to the slice): a
// request stream from be1 shows when c2 started answering; back: c1 alone again. A value that
// is no locality keeps the last one, with an event.
func mcsLocality(t *testing.T, c1, c2, c3 *cluster) {
	for _, c := range []*cluster{c1, c2, c3} {
		c.t = t
	}
	for i, c := range []*cluster{c1, c2} {
		c.labelPod("mcs", fmt.Sprintf("be%d", i+1), "near", "yes")
		c.createService(mcsService("near", map[string]string{"near": "yes"}))
		c.exportServiceAnnotated("mcs", "near", "mcs.kovn.io/locality: local-first")
	}
	waitBoth := func(c *cluster) string {
		si := c.waitImport("mcs", "near", func(si serviceImport) error {
			if len(si.Spec.IPs) == 0 || !slices.Equal(si.clusters(), []string{"az1", "az2"}) {
				return fmt.Errorf("ips %v, clusters %v", si.Spec.IPs, si.clusters())
			}
			return nil
		})
		return si.Spec.IPs[0]
	}
	// Each cluster's import has its own ClusterSetIP: the same Service, another address.
	ip1, ip3 := waitBoth(c1), waitBoth(c3)
	c3.waitBackends("mcs", "client", ip3, []string{"be1", "be2"}, 60*time.Second)
	c1.waitBackends("mcs", "be1", ip1, []string{"be1"}, 60*time.Second)
	allFromBe1 := func(when string) {
		out := c1.mustExec("mcs", "be1", "get", "-n", "20", "http://"+hostPort(ip1, 80)+"/")
		n := 0
		for _, l := range strings.Split(out, "\n") {
			if strings.HasPrefix(l, "be1 ") {
				n++
			}
		}
		if n != 20 {
			t.Fatalf("%s: %d of 20 requests answered by be1, want 20:\n%s", when, n, out)
		}
	}
	allFromBe1("local-first")

	stream := c1.startStream("mcs", "be1", "http://"+hostPort(ip1, 80)+"/", time.Second)
	c1.waitBackends("mcs", "be1", ip1, []string{"be1"}, 10*time.Second) // the stream runs meanwhile
	gone := time.Now()
	c1.kubectlOK("label", "pod", "-n", "mcs", "be1", "near-")
	c1.waitBackends("mcs", "be1", ip1, []string{"be2"}, 30*time.Second)
	back := time.Now()
	c1.labelPod("mcs", "be1", "near", "yes")
	c1.waitBackends("mcs", "be1", ip1, []string{"be1"}, 30*time.Second)
	out := stream()
	toC2, toC1, failed := streamSwitch(out, gone, back)
	if toC2 < 0 || toC1 < 0 {
		t.Fatalf("the stream never saw be2 after c1's endpoint left (%v) or be1 alone after it came back (%v):\n%s", toC2, toC1, out)
	}
	// The bound is 2 s each way; a failed request means the load balancer had no
	// backend (or a gone one) while the port moved between clusters.
	if toC2 > 2000 || toC1 > 2000 || failed != 0 {
		t.Errorf("c1's endpoint gone -> be2 after %d ms, back -> be1 alone after %d ms (want both within 2,000), %d requests failed (want 0):\n%s",
			toC2, toC1, failed, out)
	}
	t.Logf("local-first: c1's client answered by be1 alone (20 of 20), c3's by be1 and be2; c1's endpoint gone: be2 answered %d ms later; back: be1 alone %d ms later; %d of the stream's requests failed (%s)",
		toC2, toC1, failed, strings.SplitN(out, "\n", 2)[0])
	allFromBe1("local-first, c1's endpoint back")

	// A typo in c2's export: an event, c2's export keeps local-first (no LocalityConflict).
	c2.exportServiceAnnotated("mcs", "near", "mcs.kovn.io/locality: nearest")
	msg := c2.waitEvent("mcs", "near", "InvalidLocality", 30*time.Second)
	if !strings.Contains(msg, "keeps locality local-first") {
		t.Errorf("InvalidLocality event %q: want it to say the export keeps local-first", msg)
	}
	if got := c2.waitExportConditions("mcs", "near", "Valid=True Ready=True Conflict=False"); got != "" {
		t.Errorf("c2's export after a bad locality: conditions %s", got)
	}
	allFromBe1("c2's locality annotation invalid")
	t.Logf("c2's locality \"nearest\": %s", msg)

	for _, c := range []*cluster{c1, c2} {
		c.unexportService("mcs", "near")
		c.kubectlOK("delete", "service", "-n", "mcs", "near")
	}
	c1.kubectlOK("label", "pod", "-n", "mcs", "be1", "near-")
	c2.kubectlOK("label", "pod", "-n", "mcs", "be2", "near-")
}

// streamSwitch reads getstream -v's lines: how long after gone the first answer of be2 came,
// and how long after back the last one (-1 if never); and how many requests failed.
func streamSwitch(out string, gone, back time.Time) (toC2, toC1 int64, failed int) {
	toC2, toC1 = -1, -1
	lastBe2 := int64(-1)
	for _, r := range streamRequests(out) {
		switch {
		case r.failed != "":
			failed++
		case r.host == "be2" && r.at >= gone.UnixMilli() && toC2 < 0:
			toC2 = r.at - gone.UnixMilli()
		case r.host == "be2" && r.at >= back.UnixMilli():
			lastBe2 = r.at
		}
	}
	if toC2 >= 0 {
		toC1 = max(0, lastBe2-back.UnixMilli())
	}
	return toC2, toC1, failed
}

// streamRequest is one request of getstream -v: sent at (unix ms), answered by host or
// failed (refused, timeout, error).
type streamRequest struct {
	at           int64
	host, failed string
}

// streamRequests parses getstream -v's lines "at <ms> <host>" and "at <ms> failed <how>".
func streamRequests(out string) []streamRequest {
	var rs []streamRequest
	for _, l := range strings.Split(out, "\n") {
		f := strings.Fields(l)
		if len(f) < 3 || f[0] != "at" {
			continue
		}
		ms, err := strconv.ParseInt(f[1], 10, 64)
		if err != nil {
			continue
		}
		r := streamRequest{at: ms, host: f[2]}
		if f[2] == "failed" {
			r.host, r.failed = "", "error"
			if len(f) > 3 {
				r.failed = f[3]
			}
		}
		rs = append(rs, r)
	}
	return rs
}

// startStream starts getstream -v from pod ns/name to url, a request every 50 ms, each given
// timeout; the function returned stops it and returns its output.
func (c *cluster) startStream(ns, name, url string, timeout time.Duration) (stop func() string) {
	file := fmt.Sprintf("/tmp/stream-stop-%d", time.Now().UnixNano())
	out := make(chan string, 1)
	go func() {
		o, _ := c.exec(ns, name, "getstream", "-i", "50ms", "-t", timeout.String(), "-v", "-stop-file", file, url)
		out <- o
	}()
	return func() string {
		c.t.Helper()
		if _, err := c.exec(ns, name, "touch", file); err != nil {
			c.t.Fatal(err)
		}
		return <-out
	}
}
