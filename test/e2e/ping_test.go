package e2e

import "testing"

// TestPingVerdict: the ping helpers' verdict, without a rig. Losing any reply fails, except the
// first request to a new tunnel peer where the caller says that is what it is.
func TestPingVerdict(t *testing.T) {
	replies := func(seqs ...string) string {
		out := ""
		for _, s := range seqs {
			out += "reply from 10.16.0.5 seq=" + s + " time=1ms\n"
		}
		return out
	}
	tests := []struct {
		desc      string
		out       string
		allow     bool
		wantErr   bool
		wantFirst bool
	}{
		{desc: "all answered", out: replies("1", "2", "3", "4", "5") + "5 packets transmitted, 5 received\n"},
		{desc: "first lost, allowed", allow: true, wantFirst: true, out: replies("2", "3", "4", "5") + "5 packets transmitted, 4 received\n"},
		{desc: "first lost, strict", wantErr: true, out: replies("2", "3", "4", "5") + "5 packets transmitted, 4 received\n"},
		{desc: "third lost, allowed only for the first", allow: true, wantErr: true, out: replies("1", "2", "4", "5") + "5 packets transmitted, 4 received\n"},
		{desc: "two lost", allow: true, wantErr: true, out: replies("3", "4", "5") + "5 packets transmitted, 3 received\n"},
		{desc: "2 of 3 lost (what the old helper let pass)", wantErr: true, out: replies("3") + "3 packets transmitted, 1 received\n"},
		{desc: "no output (exec failed)", allow: true, wantErr: true, out: "error: unable to upgrade connection"},
	}
	for _, tc := range tests {
		first, err := pingResult(tc.out, 5, tc.allow)
		if (err != nil) != tc.wantErr || first != tc.wantFirst {
			t.Errorf("%s: first lost %v err %v, want %v and error %v", tc.desc, first, err, tc.wantFirst, tc.wantErr)
		}
	}
	if sent, lost, err := pingLoss("reply ...\n200 packets transmitted, 197 received\n"); err != nil || sent != 200 || lost != 3 {
		t.Errorf("pingLoss = %d sent %d lost %v", sent, lost, err)
	}
}
