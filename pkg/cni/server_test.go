package cni

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"
)

// fakeHandler records requests and answers with its funcs (nil: success).
type fakeHandler struct {
	add   func(ctx context.Context, req *Request) (*current.Result, error)
	del   func(ctx context.Context, req *Request) error
	check func(ctx context.Context, req *Request) error

	mu   sync.Mutex
	reqs []Request
	pids []int
}

func (f *fakeHandler) record(ctx context.Context, req *Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reqs = append(f.reqs, *req)
	pid, _ := PeerPID(ctx)
	f.pids = append(f.pids, pid)
}

func (f *fakeHandler) Add(ctx context.Context, req *Request) (*current.Result, error) {
	f.record(ctx, req)
	if f.add == nil {
		return &current.Result{}, nil
	}
	return f.add(ctx, req)
}

func (f *fakeHandler) Del(ctx context.Context, req *Request) error {
	f.record(ctx, req)
	if f.del == nil {
		return nil
	}
	return f.del(ctx, req)
}

func (f *fakeHandler) Check(ctx context.Context, req *Request) error {
	f.record(ctx, req)
	if f.check == nil {
		return nil
	}
	return f.check(ctx, req)
}

func (f *fakeHandler) requests() []Request {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]Request(nil), f.reqs...)
}

// statusHandler adds a StatusReporter to fakeHandler.
type statusHandler struct {
	fakeHandler
	status error
}

func (s *statusHandler) Status(context.Context) error { return s.status }

// socketPath returns a short socket path (sun_path is limited to 108 bytes).
func socketPath(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "kcni")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	return filepath.Join(dir, "run", "cni.sock")
}

// startServer serves h on a fresh socket until the end of the test and checks that Serve
// returns nil and removes its socket on shutdown.
func startServer(t *testing.T, h Handler) string {
	t.Helper()
	sock := socketPath(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- NewServer(sock, h).Serve(ctx) }()
	waitListening(t, sock, done)
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Serve returned %v after shutdown", err)
			}
		case <-time.After(15 * time.Second):
			t.Errorf("Serve did not return after its context was canceled")
		}
		if _, err := os.Lstat(sock); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("socket %s left behind after shutdown (%v)", sock, err)
		}
	})
	return sock
}

func waitListening(t *testing.T, sock string, done <-chan error) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		if c, err := net.Dial("unix", sock); err == nil {
			c.Close()
			return
		}
		select {
		case err := <-done:
			t.Fatalf("Serve returned early: %v", err)
		case <-time.After(5 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("server not listening on %s after 5s", sock)
		}
	}
}

func addRequest() *Request {
	return &Request{
		Command: CmdAdd, ContainerID: "0123456789abcdef", Netns: "/run/netns/cni-1", IfName: "eth0",
		PodName: "web-0", PodNamespace: "default", PodUID: "uid-1",
		Config: []byte(`{"cniVersion":"1.0.0","name":"kovn","type":"kovn-cni"}`),
	}
}

func TestServerRoundTrip(t *testing.T) {
	want := &current.Result{
		CNIVersion: ResultVersion,
		Interfaces: []*current.Interface{{Name: "0123456789ab_h"}, {Name: "eth0", Mac: "0a:58:0a:10:00:05", Sandbox: "/run/netns/cni-1"}},
		IPs: []*current.IPConfig{{
			Interface: current.Int(1),
			Address:   net.IPNet{IP: net.ParseIP("10.16.0.5").To4(), Mask: net.CIDRMask(16, 32)},
			Gateway:   net.ParseIP("10.16.0.1").To4(),
		}},
	}
	h := &fakeHandler{add: func(context.Context, *Request) (*current.Result, error) { return want, nil }}
	client := NewClient(startServer(t, h))
	req := addRequest()
	raw, err := client.Do(context.Background(), req)
	if err != nil {
		t.Fatalf("ADD: %v", err)
	}
	if _, err := current.NewResult(raw); err != nil {
		t.Fatalf("decoding result %s: %v", raw, err)
	}
	wantJSON, _ := json.Marshal(want)
	if string(raw) != string(wantJSON) {
		t.Errorf("result = %s, want %s", raw, wantJSON)
	}
	for _, cmd := range []string{CmdCheck, CmdDel} {
		r := *req
		r.Command = cmd
		if raw, err := client.Do(context.Background(), &r); err != nil || len(raw) != 0 {
			t.Errorf("%s = (%s, %v), want no result and no error", cmd, raw, err)
		}
	}
	reqs := h.requests()
	if len(reqs) != 3 || !reflect.DeepEqual(reqs[0], *req) || reqs[1].Command != CmdCheck || reqs[2].Command != CmdDel {
		t.Errorf("handler saw %+v, want ADD %+v then CHECK and DEL", reqs, *req)
	}
	for i, pid := range h.pids {
		if pid != os.Getpid() {
			t.Errorf("request %d: PeerPID = %d, want the client's pid %d", i, pid, os.Getpid())
		}
	}
}

func TestServerErrorMapping(t *testing.T) {
	own := types.NewError(types.ErrInvalidNetworkConfig, "subnet has no free address", "ovn-default")
	h := &fakeHandler{
		add: func(_ context.Context, req *Request) (*current.Result, error) {
			switch req.PodName {
			case "panics":
				panic("plumbing exploded")
			case "nil-result":
				return nil, nil
			case "own-error":
				return nil, own
			}
			return nil, fmt.Errorf("waiting for pod: %w", ErrTryAgain)
		},
		del:   func(context.Context, *Request) error { return fmt.Errorf("pod default/web-0: %w", ErrPodNotFound) },
		check: func(context.Context, *Request) error { return errors.New("eth0 lacks 10.16.0.5/16") },
	}
	client := NewClient(startServer(t, h))
	call := func(mutate func(r *Request)) *types.Error {
		t.Helper()
		r := addRequest()
		mutate(r)
		_, err := client.Do(context.Background(), r)
		var cniErr *types.Error
		if !errors.As(err, &cniErr) {
			t.Fatalf("error %v (%T) is not a *types.Error", err, err)
		}
		return cniErr
	}
	for _, tc := range []struct {
		desc    string
		mutate  func(r *Request)
		code    uint
		message string
	}{
		{"transient", func(*Request) {}, types.ErrTryAgainLater, "waiting for pod: pod network not ready"},
		{"pod gone on DEL", func(r *Request) { r.Command = CmdDel }, types.ErrUnknownContainer, "pod default/web-0: pod not found"},
		{"check failure", func(r *Request) { r.Command = CmdCheck }, types.ErrInternal, "eth0 lacks 10.16.0.5/16"},
		{"handler's own CNI error", func(r *Request) { r.PodName = "own-error" }, own.Code, own.Msg},
		{"panic", func(r *Request) { r.PodName = "panics" }, types.ErrInternal, "panicked handling ADD: plumbing exploded"},
		{"no result", func(r *Request) { r.PodName = "nil-result" }, types.ErrInternal, "no result"},
		{"invalid request", func(r *Request) { r.Netns = "" }, types.ErrInvalidEnvironmentVariables, "CNI_NETNS"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			got := call(tc.mutate)
			if got.Code != tc.code || !strings.Contains(got.Msg, tc.message) {
				t.Errorf("got %+v, want code %d with %q", got, tc.code, tc.message)
			}
		})
	}
	for _, r := range h.requests() {
		if r.Netns == "" {
			t.Errorf("the handler was called with an invalid request: %+v", r)
		}
	}
}

func TestServerSocketHandling(t *testing.T) {
	sock := startServer(t, &fakeHandler{})
	fi, err := os.Lstat(sock)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode()&os.ModeSocket == 0 || fi.Mode().Perm() != 0o600 {
		t.Errorf("socket mode = %s, want a socket with 0600", fi.Mode())
	}
	// A second server must not steal a live socket.
	err = NewServer(sock, &fakeHandler{}).Serve(context.Background())
	if err == nil || !strings.Contains(err.Error(), "already serving") {
		t.Errorf("second Serve on a live socket = %v, want an 'already serving' error", err)
	}
	if _, err := NewClient(sock).Do(context.Background(), addRequest()); err != nil {
		t.Errorf("first server broken by the second's attempt: %v", err)
	}

	// A file that is not a socket is left alone.
	file := filepath.Join(filepath.Dir(sock), "not-a-socket")
	if err := os.WriteFile(file, []byte("keep"), 0o644); err != nil {
		t.Fatal(err)
	}
	err = NewServer(file, &fakeHandler{}).Serve(context.Background())
	if err == nil || !strings.Contains(err.Error(), "not a socket") {
		t.Errorf("Serve on a regular file = %v, want a 'not a socket' error", err)
	}
	if data, _ := os.ReadFile(file); string(data) != "keep" {
		t.Errorf("regular file was modified: %q", data)
	}
}

func TestServerReplacesStaleSocket(t *testing.T) {
	sock := socketPath(t)
	if err := os.MkdirAll(filepath.Dir(sock), 0o755); err != nil {
		t.Fatal(err)
	}
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: sock, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	l.SetUnlinkOnClose(false)
	l.Close() // a dead daemon's socket: the file stays, nobody listens
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- NewServer(sock, &fakeHandler{}).Serve(ctx) }()
	waitListening(t, sock, done)
	if _, err := NewClient(sock).Do(context.Background(), addRequest()); err != nil {
		t.Errorf("ADD through the server that replaced a stale socket: %v", err)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Serve: %v", err)
	}
}

func TestClientTransportErrors(t *testing.T) {
	sock := socketPath(t)
	_, err := NewClient(sock).Do(context.Background(), addRequest())
	var cniErr *types.Error
	if !errors.As(err, &cniErr) || cniErr.Code != types.ErrTryAgainLater ||
		!strings.Contains(cniErr.Msg, sock) || !strings.Contains(cniErr.Msg, "is kovn-daemon running") {
		t.Errorf("daemon down: got %v, want code 11 naming the socket", err)
	}

	handlerDone := make(chan error, 1)
	h := &fakeHandler{add: func(ctx context.Context, _ *Request) (*current.Result, error) {
		<-ctx.Done() // a slow daemon notices that the shim gave up
		handlerDone <- ctx.Err()
		return nil, ctx.Err()
	}}
	client := NewClient(startServer(t, h))
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	_, err = client.Do(ctx, addRequest())
	if !errors.As(err, &cniErr) || cniErr.Code != types.ErrTryAgainLater || !strings.Contains(cniErr.Msg, "did not answer ADD") {
		t.Errorf("slow daemon: got %v, want code 11 'did not answer'", err)
	}
	select {
	case <-handlerDone:
	case <-time.After(5 * time.Second):
		t.Error("the handler's context was not canceled when the client gave up")
	}
}

func TestServerStatus(t *testing.T) {
	if err := NewClient(startServer(t, &fakeHandler{})).Status(context.Background()); err != nil {
		t.Errorf("STATUS without a StatusReporter: %v", err)
	}
	h := &statusHandler{status: fmt.Errorf("OVS not connected: %w", ErrTryAgain)}
	err := NewClient(startServer(t, h)).Status(context.Background())
	var cniErr *types.Error
	if !errors.As(err, &cniErr) || cniErr.Code != types.ErrTryAgainLater || !strings.Contains(cniErr.Msg, "OVS not connected") {
		t.Errorf("STATUS of a daemon that is not ready: %v", err)
	}
}

func TestResponseJSON(t *testing.T) {
	// The wire format is part of the contract between shim and daemon of different builds.
	data, err := json.Marshal(&Response{Error: types.NewError(3, "gone", "")})
	if err != nil || string(data) != `{"error":{"code":3,"msg":"gone"}}` {
		t.Errorf("Response JSON = %s, %v", data, err)
	}
	data, err = json.Marshal(addRequest())
	if err != nil || !strings.Contains(string(data), `"command":"ADD","containerID":"0123456789abcdef","netns":"/run/netns/cni-1","ifName":"eth0","podName":"web-0","podNamespace":"default","podUID":"uid-1","config":`) {
		t.Errorf("Request JSON = %s, %v", data, err)
	}
}
