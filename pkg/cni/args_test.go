package cni

import (
	"errors"
	"strings"
	"testing"

	"github.com/containernetworking/cni/pkg/types"
)

func TestParsePodArgs(t *testing.T) {
	want := PodArgs{Namespace: "default", Name: "bb1", InfraContainerID: "abc123", UID: "u-1"}
	for _, tc := range []struct {
		desc    string
		in      string
		want    PodArgs
		wantErr bool
	}{
		{desc: "containerd order", in: "IgnoreUnknown=1;K8S_POD_NAMESPACE=default;K8S_POD_NAME=bb1;K8S_POD_INFRA_CONTAINER_ID=abc123;K8S_POD_UID=u-1", want: want},
		{desc: "other order", in: "K8S_POD_UID=u-1;K8S_POD_NAME=bb1;IgnoreUnknown=1;K8S_POD_INFRA_CONTAINER_ID=abc123;K8S_POD_NAMESPACE=default", want: want},
		{desc: "unknown keys and spaces", in: " K8S_POD_NAME=bb1 ; FOO=bar;K8S_POD_NAMESPACE=default;;", want: PodArgs{Namespace: "default", Name: "bb1"}},
		{desc: "empty", in: "", want: PodArgs{}},
		{desc: "value with =", in: "K8S_POD_NAME=a=b", want: PodArgs{Name: "a=b"}},
		{desc: "same key twice, same value", in: "K8S_POD_NAME=a;K8S_POD_NAME=a", want: PodArgs{Name: "a"}},
		{desc: "same key twice, two values", in: "K8S_POD_NAME=a;K8S_POD_NAME=b", wantErr: true},
		{desc: "pair without =", in: "K8S_POD_NAME=a;garbage", wantErr: true},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			got, err := ParsePodArgs(tc.in)
			if tc.wantErr {
				if !errors.Is(err, ErrInvalidArgs) {
					t.Fatalf("ParsePodArgs(%q) error = %v, want ErrInvalidArgs", tc.in, err)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParsePodArgs(%q): %v", tc.in, err)
			}
			if got != tc.want {
				t.Errorf("ParsePodArgs(%q) = %+v, want %+v", tc.in, got, tc.want)
			}
		})
	}
}

func TestParseNetConf(t *testing.T) {
	conf, err := ParseNetConf([]byte(`{"cniVersion":"1.0.0","name":"kovn","type":"kovn-cni"}`))
	if err != nil {
		t.Fatal(err)
	}
	if conf.ServerSocket != DefaultSocketPath || conf.MTU != 0 || conf.Name != "kovn" || conf.CNIVersion != "1.0.0" {
		t.Errorf("defaults: got %+v", conf)
	}
	conf, err = ParseNetConf([]byte(`{"cniVersion":"0.4.0","name":"kovn","type":"kovn-cni","serverSocket":"/x/y.sock","mtu":1450}`))
	if err != nil {
		t.Fatal(err)
	}
	if conf.ServerSocket != "/x/y.sock" || conf.MTU != 1450 {
		t.Errorf("explicit: got %+v", conf)
	}
	if _, err := ParseNetConf([]byte(`{"name":"kovn","mtu":100}`)); !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("mtu 100: error = %v, want ErrInvalidConfig", err)
	}
	if _, err := ParseNetConf([]byte(`{"name":`)); !errors.Is(err, ErrDecoding) {
		t.Errorf("truncated JSON: error = %v, want ErrDecoding", err)
	}
}

func TestRequestValidate(t *testing.T) {
	full := Request{Command: CmdAdd, ContainerID: "c1", Netns: "/run/netns/x", IfName: "eth0", PodNamespace: "ns", PodName: "p"}
	for _, tc := range []struct {
		desc     string
		mutate   func(r *Request)
		wantMsgs []string // empty: valid
	}{
		{desc: "full ADD", mutate: func(*Request) {}},
		{desc: "CHECK", mutate: func(r *Request) { r.Command = CmdCheck }},
		{desc: "bare DEL", mutate: func(r *Request) { *r = Request{Command: CmdDel, ContainerID: "c1"} }},
		{desc: "DEL without container", mutate: func(r *Request) { *r = Request{Command: CmdDel} }, wantMsgs: []string{"CNI_CONTAINERID"}},
		{desc: "ADD without netns and pod", mutate: func(r *Request) { r.Netns, r.PodName = "", "" }, wantMsgs: []string{"CNI_NETNS", "K8S_POD_NAME"}},
		{desc: "unknown command", mutate: func(r *Request) { r.Command = "GC" }, wantMsgs: []string{`"GC"`}},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			r := full
			tc.mutate(&r)
			err := r.Validate()
			if len(tc.wantMsgs) == 0 {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				return
			}
			if !errors.Is(err, ErrInvalidRequest) {
				t.Fatalf("Validate error = %v, want ErrInvalidRequest", err)
			}
			for _, m := range tc.wantMsgs {
				if !strings.Contains(err.Error(), m) {
					t.Errorf("error %q does not mention %s", err, m)
				}
			}
			if code := AsCNIError(err).Code; code != types.ErrInvalidEnvironmentVariables {
				t.Errorf("code = %d, want %d", code, types.ErrInvalidEnvironmentVariables)
			}
		})
	}
}

func TestHostIfName(t *testing.T) {
	id := "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	if got := HostIfName(id); got != "0123456789ab_h" {
		t.Errorf("HostIfName(64 hex) = %q", got)
	}
	for _, odd := range []string{"short", "with/slash-and-more-chars", "", "ünïcode-container-id"} {
		got := HostIfName(odd)
		if len(got) != 14 || strings.ContainsAny(got[:12], "/-ü ") || got != HostIfName(odd) {
			t.Errorf("HostIfName(%q) = %q, want 12 hex + _h, stable", odd, got)
		}
	}
}

func TestAsCNIError(t *testing.T) {
	for _, tc := range []struct {
		err  error
		code uint
	}{
		{ErrPodNotFound, types.ErrUnknownContainer},
		{ErrTryAgain, types.ErrTryAgainLater},
		{ErrInvalidRequest, types.ErrInvalidEnvironmentVariables},
		{ErrInvalidArgs, types.ErrInvalidEnvironmentVariables},
		{ErrDecoding, types.ErrDecodingFailure},
		{ErrInvalidConfig, types.ErrInvalidNetworkConfig},
		{ErrInvalidNetNS, types.ErrInvalidNetNS},
		{errors.New("boom"), types.ErrInternal},
	} {
		wrapped := errors.Join(errors.New("context"), tc.err)
		got := AsCNIError(wrapped)
		if got.Code != tc.code || got.Msg != wrapped.Error() {
			t.Errorf("AsCNIError(%v) = %+v, want code %d with the full message", tc.err, got, tc.code)
		}
	}
	if AsCNIError(nil) != nil {
		t.Error("AsCNIError(nil) != nil")
	}
	own := types.NewError(42, "mine", "details")
	if got := AsCNIError(errors.Join(errors.New("x"), own)); got != own {
		t.Errorf("a *types.Error in the chain must pass through, got %+v", got)
	}
	if !IsPodNotFound(AsCNIError(ErrPodNotFound)) || !IsPodNotFound(ErrPodNotFound) || IsPodNotFound(AsCNIError(ErrTryAgain)) {
		t.Error("IsPodNotFound does not recognize the daemon's pod-gone error")
	}
}
