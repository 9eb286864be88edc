package ovn_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/kovn/kovn/pkg/ovn"
)

func TestValidateEndpoints(t *testing.T) {
	tests := []struct {
		desc      string
		endpoints []string
		certs     bool
		wantErr   string // substring; empty means valid
	}{
		{desc: "tcp ipv4", endpoints: []string{"tcp:10.0.0.1:6641"}},
		{desc: "tcp ipv6", endpoints: []string{"tcp:[fd00::1]:6641"}},
		{desc: "tcp hostname", endpoints: []string{"tcp:ovn-nb.kube-system:6641"}},
		{desc: "unix", endpoints: []string{"unix:/var/run/ovn/ovnnb_db.sock"}},
		{desc: "raft cluster", endpoints: []string{"tcp:10.0.0.1:6641", "tcp:10.0.0.2:6641", "tcp:10.0.0.3:6641"}},
		{desc: "ssl with certs", endpoints: []string{"ssl:10.0.0.1:6641"}, certs: true},
		{desc: "none", endpoints: nil, wantErr: "no OVSDB endpoints"},
		{desc: "no scheme", endpoints: []string{"10.0.0.1"}, wantErr: `invalid OVSDB endpoint "10.0.0.1": want tcp:IP:PORT, ssl:IP:PORT or unix:PATH`},
		{desc: "unknown scheme", endpoints: []string{"http://10.0.0.1:6641"}, wantErr: `invalid OVSDB endpoint "http://10.0.0.1:6641"`},
		{desc: "tcp without port", endpoints: []string{"tcp:10.0.0.1"}, wantErr: `invalid OVSDB endpoint "tcp:10.0.0.1"`},
		{desc: "tcp bad port", endpoints: []string{"tcp:10.0.0.1:66410"}, wantErr: "port must be 1-65535"},
		{desc: "tcp no host", endpoints: []string{"tcp::6641"}, wantErr: "missing address"},
		{desc: "unix relative", endpoints: []string{"unix:ovnnb_db.sock"}, wantErr: "must be absolute"},
		{desc: "unix empty", endpoints: []string{"unix:"}, wantErr: "must be absolute"},
		{desc: "one bad among good", endpoints: []string{"tcp:10.0.0.1:6641", "tcp:10.0.0.2"}, wantErr: `"tcp:10.0.0.2"`},
		{desc: "ssl without certs", endpoints: []string{"ssl:10.0.0.1:6641"}, wantErr: "need a certificate"},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			cfg := ovn.Config{Endpoints: tt.endpoints}
			if tt.certs {
				cfg.Cert, cfg.Key, cfg.CACert = "/pki/c.pem", "/pki/k.pem", "/pki/ca.pem"
			}
			err := cfg.Validate()
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("Validate() = %v, want nil", err)
			case tt.wantErr != "" && err == nil:
				t.Fatalf("Validate() = nil, want error containing %q", tt.wantErr)
			case tt.wantErr != "" && !strings.Contains(err.Error(), tt.wantErr):
				t.Fatalf("Validate() = %q, want it to contain %q", err, tt.wantErr)
			}
		})
	}
}

func TestSplitEndpoints(t *testing.T) {
	got := ovn.SplitEndpoints(" tcp:10.0.0.1:6641,tcp:10.0.0.2:6641,, ")
	want := []string{"tcp:10.0.0.1:6641", "tcp:10.0.0.2:6641"}
	if !slices.Equal(got, want) {
		t.Fatalf("SplitEndpoints = %q, want %q", got, want)
	}
}
