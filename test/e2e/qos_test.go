package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/kovn/kovn/pkg/cluster/topology"
)

const (
	ingressBW = "kubernetes.io/ingress-bandwidth"
	egressBW  = "kubernetes.io/egress-bandwidth"
	// A limit is a policer (an OVN meter drops what exceeds it): a ceiling that TCP does not
	// fill evenly. Measured on the wire over 6 s after a 2 s start, one connection, the lab
	// gave 98-99.6 % of an ingress limit (metered on the receiving node) and 92-97 % of an
	// egress limit (metered on the sender's own node), never more than the limit. A rate must
	// be within 15 % of its limit either way (the acceptance): a wrong limit (20M for
	// 100M or the other way round) or none at all is far outside.
	qosCeiling = 1.15
	qosFloor   = 0.85
)

// TestPodQoS: a pod's bandwidth annotations limit its TCP traffic each way, on its node, by
// OVN QoS meters: q (c1-n1) streams to and from p (c1-n2), each measured by the receiver.
func TestPodQoS(t *testing.T) {
	cfg := rigConfig(t, 1, 2)
	cfg.Kovn = true
	r := upRig(t, cfg)
	c := newCluster(t, r, "c1")
	c.createPod(testboxPod("default", "q", onNode("c1-n1"), withAnnotations(ingressBW, "20M", egressBW, "100M")))
	c.createPod(testboxPod("default", "u", onNode("c1-n1")))
	c.createPod(testboxPod("default", "p", onNode("c1-n2")))
	pods := map[string]*corev1.Pod{}
	for _, n := range []string{"q", "u", "p"} {
		pods[n] = c.waitRunning("default", n, 2*time.Minute)
	}
	addr := func(pod string, v6 bool) string {
		for _, ip := range pods[pod].Status.PodIPs {
			if strings.Contains(ip.IP, ":") == v6 {
				return net.JoinHostPort(ip.IP, "5201")
			}
		}
		t.Fatalf("pod %s has no address of that family", pod)
		return ""
	}
	measure := func(t *testing.T, what, from, to, dst string, limitMbps float64) {
		t.Helper()
		checkRate(t, what, c.stream(t, "default", from, to, dst, 8*time.Second, nil), limitMbps)
	}

	t.Run("egress 100M and ingress 20M (IPv4), then egress 20M and ingress 100M (IPv6)", func(t *testing.T) {
		c.t = t
		measure(t, "q -> p, egress 100M, IPv4", "q", "p", addr("p", false), 100)
		measure(t, "p -> q, ingress 20M, IPv4", "p", "q", addr("q", false), 20)
		c.annotate(t, "default", "q", map[string]*string{ingressBW: ptr.To("100M"), egressBW: ptr.To("20M")})
		c.waitQoS(t, "default", "q", 2)
		measure(t, "q -> p, egress 20M, IPv6", "q", "p", addr("p", true), 20)
		measure(t, "p -> q, ingress 100M, IPv6", "p", "q", addr("q", true), 100)
	})

	t.Run("an unlimited pod on q's node is not slowed", func(t *testing.T) {
		c.t = t
		out := c.stream(t, "default", "u", "p", addr("p", false), 6*time.Second, nil).rate()
		in := c.stream(t, "default", "p", "u", addr("u", false), 6*time.Second, nil).rate()
		t.Logf("u -> p %.0f Mbit/s, p -> u %.0f Mbit/s (q's limits: 20M and 100M)", out, in)
		// The lab's unlimited streams vary from 240 to 700 Mbit/s (2 cores); a meter of q's
		// would hold u at or below 115.
		if out < 150 || in < 150 {
			t.Errorf("unlimited pod u: %.0f and %.0f Mbit/s, want both above 150 (1.5x q's largest limit)", out, in)
		}
	})

	t.Run("egress changed 100M -> 20M on the running pod: the new rate holds within 1 s", func(t *testing.T) {
		c.t = t
		c.annotate(t, "default", "q", map[string]*string{egressBW: ptr.To("100M")})
		c.waitQoS(t, "default", "q", 2)
		var changed time.Time
		s := c.stream(t, "default", "q", "p", addr("p", false), 10*time.Second, func() {
			time.Sleep(4 * time.Second)
			changed = time.Now()
			c.annotate(t, "default", "q", map[string]*string{egressBW: ptr.To("20M")})
		})
		before := s.rateBetween(s.start().Add(2*time.Second), changed)
		burst := float64(topology.QoSBurst(20000)) / 1000
		holds, ok := s.holdsFrom(changed, 20*qosCeiling, burst)
		t.Logf("before the change %.1f Mbit/s; 20M (a bucket of %.0f Mbit/s and %.0f Mbit) holds %v after the annotation changed",
			before, 20*qosCeiling, burst, holds.Round(10*time.Millisecond))
		// Two seconds of one connection: only a check that 100M was in force, neither 20M
		// (at most 23) nor no limit (hundreds).
		if before < 50 || before > 100*qosCeiling {
			t.Errorf("before the change: %.1f Mbit/s, want about 100", before)
		}
		if !ok || holds > time.Second {
			t.Errorf("20M held %v after the change (ok %t), want within 1 s:\n%s", holds, ok, s.String())
		}
		settled := changed.Add(2 * time.Second)
		checkRateOf(t, "q -> p after the change", s.rateBetween(settled, s.end()), s.payloadBetween(settled, s.end()), 20)
	})

	t.Run("a malformed and an out-of-range value: an event each, the rate unchanged", func(t *testing.T) {
		c.t = t
		for _, bad := range []string{"fast", "10P"} {
			c.annotate(t, "default", "q", map[string]*string{egressBW: ptr.To(bad)})
			msg := c.waitEventWith("default", "q", "InvalidBandwidth", strconv.Quote(bad), 30*time.Second)
			t.Logf("egress-bandwidth %q: event %q", bad, msg)
			measure(t, "q -> p with egress-bandwidth "+bad, "q", "p", addr("p", false), 20)
		}
	})

	t.Run("a Subnet's podBandwidth: the default of a pod without annotations, a ceiling for one with", func(t *testing.T) {
		c.t = t
		qosRate := func(pod string) string {
			return strings.TrimSpace(c.nbctl("--bare", "--columns=bandwidth", "find", "QoS", fmt.Sprintf(`match="inport == \"%s.default\""`, pod)))
		}
		waitRate := func(pod, want string) {
			t.Helper()
			if err := eventually(30*time.Second, func() error {
				if got := qosRate(pod); got != want {
					return fmt.Errorf("%s's egress QoS %q, want %q", pod, got, want)
				}
				return nil
			}); err != nil {
				t.Fatal(err)
			}
		}
		c.kubectlOK("patch", "subnet", "ovn-default", "--type=merge", "-p", `{"spec":{"podBandwidth":{"egress":"30M"}}}`)
		waitRate("u", "burst=24000 rate=30000") // u has no annotation: the Subnet's default
		waitRate("q", "burst=16000 rate=20000") // q's 20M is below it
		c.annotate(t, "default", "u", map[string]*string{egressBW: ptr.To("1G")})
		msg := c.waitEventWith("default", "u", "InvalidBandwidth", "above the Subnet's limit", 30*time.Second)
		waitRate("u", "burst=24000 rate=30000")
		t.Logf("u asks for 1G under a 30M Subnet: %q", msg)
		c.kubectlOK("patch", "subnet", "ovn-default", "--type=merge", "-p", `{"spec":{"podBandwidth":{"egress":"fast"}}}`)
		c.waitSubnetCondition("ovn-default", "Validated", "False", "InvalidBandwidth", 20*time.Second)
		time.Sleep(2 * time.Second)
		waitRate("u", "burst=24000 rate=30000") // the last valid default stays
		c.kubectlOK("patch", "subnet", "ovn-default", "--type=json", "-p", `[{"op":"remove","path":"/spec/podBandwidth"}]`)
		c.waitSubnetCondition("ovn-default", "Validated", "True", "", 20*time.Second)
		waitRate("u", "burst=800000 rate=1000000") // no ceiling now: u's own 1G
		c.annotate(t, "default", "u", map[string]*string{egressBW: nil})
		c.waitQoS(t, "default", "u", 0)
	})

	t.Run("annotations removed: no limit and no QoS row left", func(t *testing.T) {
		c.t = t
		c.annotate(t, "default", "q", map[string]*string{ingressBW: nil, egressBW: nil})
		c.waitQoS(t, "default", "q", 0)
		out := c.stream(t, "default", "q", "p", addr("p", false), 6*time.Second, nil).rate()
		t.Logf("q -> p without limits: %.0f Mbit/s", out)
		if out < 150 {
			t.Errorf("q -> p without limits: %.0f Mbit/s, want above 150", out)
		}
	})
}

// checkRate checks a stream's rate (after its first 2 s) against a limit.
func checkRate(t *testing.T, what string, s tcpStream, limitMbps float64) {
	t.Helper()
	checkRateOf(t, what, s.rate(), s.goodput(), limitMbps)
}

// checkRateOf checks a rate on the wire (goodput is its TCP payload, logged) against a limit:
// between qosFloor and qosCeiling times it.
func checkRateOf(t *testing.T, what string, got, goodput, limitMbps float64) {
	t.Helper()
	lo, hi := limitMbps*qosFloor, limitMbps*qosCeiling
	t.Logf("%s: %.1f Mbit/s on the wire, TCP payload %.1f (limit %.0f, allowed %.1f..%.1f)", what, got, goodput, limitMbps, lo, hi)
	if got < lo || got > hi {
		t.Errorf("%s: %.1f Mbit/s, want %.0f..%.0f %% of %.0f", what, got, qosFloor*100, qosCeiling*100, limitMbps)
	}
}

// annotate sets (nil: removes) annotations of pod in ns with a merge patch.
func (c *cluster) annotate(t *testing.T, ns, pod string, kv map[string]*string) {
	t.Helper()
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": kv}})
	if _, err := c.kc.CoreV1().Pods(ns).Patch(context.Background(), pod, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
}

// waitQoS waits until the port of pod in ns has n QoS rows in NB.
func (c *cluster) waitQoS(t *testing.T, ns, pod string, n int) {
	t.Helper()
	port := pod + "." + ns
	if err := eventually(30*time.Second, func() error {
		out := c.nbctl("--bare", "--columns=match", "list", "QoS")
		if got := strings.Count(out, `"`+port+`"`); got != n {
			return fmt.Errorf("%d QoS rows for %s, want %d:\n%s", got, port, n, out)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

// waitEventWith waits for an event with reason on the named object whose message contains
// text, and returns the message.
func (c *cluster) waitEventWith(ns, name, reason, text string, timeout time.Duration) string {
	c.t.Helper()
	var msg string
	if err := eventually(timeout, func() error {
		evs, err := c.kc.CoreV1().Events(ns).List(context.Background(), metav1.ListOptions{FieldSelector: "involvedObject.name=" + name})
		if err != nil {
			return err
		}
		for _, e := range evs.Items {
			if e.Reason == reason && strings.Contains(e.Message, text) {
				msg = e.Message
				return nil
			}
		}
		return fmt.Errorf("no %s event mentioning %s on %s/%s yet:\n%s", reason, text, ns, name, c.events(ns, name))
	}); err != nil {
		c.t.Fatal(err)
	}
	return msg
}

// tcpStream is what testbox tcprecv printed: per 100 ms interval, the bytes the receiving
// pod's interface received (whole frames: what the meter on the pod's port counts) and the
// TCP payload among them.
type tcpStream struct {
	at      []time.Time // each interval's end
	bytes   []int64     // frames
	payload []int64
}

// streamConns is how many TCP connections a stream runs in parallel: one, as a user's iperf
// does by default. Connections sharing a policer lose packets together and one of them stalls
// in a retransmission timeout now and then: through an egress 20M, one connection gave
// 19.0-19.3 Mbit/s in 8 runs, four 15.1-20.0, eight 8.4-19.7.
const streamConns = 1

// stream sends TCP from pod from to dst (pod to's address; both pods in ns) for d over
// streamConns connections and returns what to received; during, when set, runs while the
// stream flows.
func (c *cluster) stream(t *testing.T, ns, from, to, dst string, d time.Duration, during func()) tcpStream {
	t.Helper()
	type result struct {
		out string
		err error
	}
	recv := make(chan result, 1)
	go func() {
		out, err := c.exec(ns, to, "tcprecv", "-p", "5201", "-n", strconv.Itoa(streamConns), "-i", "100ms", "-t", "60s")
		recv <- result{out, err}
	}()
	sent := make(chan result, 1)
	go func() {
		out, err := c.exec(ns, from, "tcpsend", "-t", d.String(), "-P", strconv.Itoa(streamConns), dst)
		sent <- result{out, err}
	}()
	if during != nil {
		during()
	}
	if s := <-sent; s.err != nil {
		t.Fatalf("tcpsend %s -> %s: %v %s", from, dst, s.err, s.out)
	}
	rv := <-recv
	if rv.err != nil {
		t.Fatalf("tcprecv on %s: %v %s", to, rv.err, rv.out)
	}
	var s tcpStream
	for _, l := range strings.Split(rv.out, "\n") {
		var ns, n, wire int64
		if _, err := fmt.Sscanf(l, "%d %d %d", &ns, &n, &wire); err == nil {
			s.at, s.payload, s.bytes = append(s.at, time.Unix(0, ns)), append(s.payload, n), append(s.bytes, wire)
		}
	}
	// The stream's own span: from the first interval with data to the last.
	for len(s.payload) > 0 && s.payload[0] == 0 {
		s.at, s.bytes, s.payload = s.at[1:], s.bytes[1:], s.payload[1:]
	}
	for n := len(s.payload); n > 0 && s.payload[n-1] == 0; n = len(s.payload) {
		s.at, s.bytes, s.payload = s.at[:n-1], s.bytes[:n-1], s.payload[:n-1]
	}
	if len(s.payload) < 10 {
		t.Fatalf("stream %s -> %s: %d intervals with data:\n%s", from, dst, len(s.bytes), rv.out)
	}
	return s
}

func (s tcpStream) start() time.Time { return s.at[0].Add(-100 * time.Millisecond) }
func (s tcpStream) end() time.Time   { return s.at[len(s.at)-1] }

// rate is the rate after the first 2 s (TCP's slow start and the meter's full bucket),
// without the last interval (a part of one), in Mbit/s.
func (s tcpStream) rate() float64 {
	return s.rateBetween(s.start().Add(2*time.Second), s.at[len(s.at)-2])
}

// goodput is rate's TCP payload, what an application sees.
func (s tcpStream) goodput() float64 {
	return s.payloadBetween(s.start().Add(2*time.Second), s.at[len(s.at)-2])
}

// payloadBetween is rateBetween of the TCP payload.
func (s tcpStream) payloadBetween(from, to time.Time) float64 {
	return tcpStream{at: s.at, bytes: s.payload}.rateBetween(from, to)
}

// rateBetween is the rate of the intervals ending in (from, to], in Mbit/s.
func (s tcpStream) rateBetween(from, to time.Time) float64 {
	var b int64
	var first, last time.Time
	for i, at := range s.at {
		if at.After(from) && !at.After(to) {
			if first.IsZero() {
				first = at.Add(-100 * time.Millisecond)
			}
			last = at
			b += s.bytes[i]
		}
	}
	if last.IsZero() {
		return 0
	}
	return float64(b) * 8 / last.Sub(first).Seconds() / 1e6
}

// holdsFrom is how long after t the stream first keeps, from then to its end, to a token
// bucket of mbps and burstMbit: over every span (t0, t1] at most mbps*(t1-t0) + burstMbit
// megabits pass, which is what a meter of that rate and bucket lets through. False when no
// such point comes.
func (s tcpStream) holdsFrom(t time.Time, mbps, burstMbit float64) (time.Duration, bool) {
	for i := range s.at {
		if s.at[i].Before(t) {
			continue
		}
		ok := true
		var mbit float64
		for j := i + 1; j < len(s.at) && ok; j++ {
			mbit += float64(s.bytes[j]) * 8 / 1e6
			ok = mbit <= mbps*s.at[j].Sub(s.at[i]).Seconds()+burstMbit
		}
		if ok {
			return s.at[i].Sub(t), true
		}
	}
	return 0, false
}

func (s tcpStream) String() string {
	var b strings.Builder
	for i := range s.at {
		fmt.Fprintf(&b, "%s %.1f Mbit/s\n", s.at[i].Format("15:04:05.000"), float64(s.bytes[i])*8/0.1/1e6)
	}
	return b.String()
}
