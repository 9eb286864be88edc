package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"
	"github.com/containernetworking/cni/pkg/types/create"

	"github.com/kovn/kovn/pkg/cni"
)

// daemon is a kovn-daemon stand-in: the real cni.Server with a scripted handler.
type daemon struct {
	sock string
	del  error
	chk  error

	mu   sync.Mutex
	reqs []cni.Request
}

func (d *daemon) record(req *cni.Request) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.reqs = append(d.reqs, *req)
}

func (d *daemon) Add(_ context.Context, req *cni.Request) (*current.Result, error) {
	d.record(req)
	return &current.Result{
		CNIVersion: cni.ResultVersion,
		Interfaces: []*current.Interface{{Name: "abc_h"}, {Name: req.IfName, Mac: "0a:58:0a:10:00:05", Sandbox: req.Netns}},
		IPs: []*current.IPConfig{{
			Interface: current.Int(1),
			Address:   net.IPNet{IP: net.ParseIP("10.16.0.5"), Mask: net.CIDRMask(16, 32)},
			Gateway:   net.ParseIP("10.16.0.1"),
		}},
	}, nil
}

func (d *daemon) Del(_ context.Context, req *cni.Request) error {
	d.record(req)
	return d.del
}

func (d *daemon) Check(_ context.Context, req *cni.Request) error {
	d.record(req)
	return d.chk
}

func (d *daemon) requests() []cni.Request {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]cni.Request(nil), d.reqs...)
}

func startDaemon(t *testing.T) *daemon {
	t.Helper()
	dir, err := os.MkdirTemp("", "kcni")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	d := &daemon{sock: filepath.Join(dir, "cni.sock")}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- cni.NewServer(d.sock, d).Serve(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	deadline := time.Now().Add(5 * time.Second)
	for {
		if c, err := net.Dial("unix", d.sock); err == nil {
			c.Close()
			return d
		}
		if time.Now().After(deadline) {
			t.Fatal("daemon not listening after 5s")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func cmdArgs(sock, cniVersion, cniArgs string) *skel.CmdArgs {
	return &skel.CmdArgs{
		ContainerID: "0123456789abcdef",
		Netns:       "/run/containerd/netns/cni-1",
		IfName:      "eth0",
		Args:        cniArgs,
		StdinData:   []byte(fmt.Sprintf(`{"cniVersion":%q,"name":"kovn","type":"kovn-cni","serverSocket":%q}`, cniVersion, sock)),
	}
}

const podArgs = "K8S_POD_UID=uid-1;IgnoreUnknown=1;K8S_POD_NAME=web-0;K8S_POD_INFRA_CONTAINER_ID=0123456789abcdef;K8S_POD_NAMESPACE=default"

func TestAddPrintsResultInRequestedVersion(t *testing.T) {
	d := startDaemon(t)
	for _, v := range []string{"0.3.1", "0.4.0", "1.0.0", "1.1.0"} {
		t.Run(v, func(t *testing.T) {
			var out bytes.Buffer
			if err := cmdAdd(cmdArgs(d.sock, v, podArgs), &out); err != nil {
				t.Fatalf("ADD: %v", err)
			}
			var printed struct {
				CNIVersion string `json:"cniVersion"`
			}
			if err := json.Unmarshal(out.Bytes(), &printed); err != nil || printed.CNIVersion != v {
				t.Fatalf("printed %s (%v), want a result with cniVersion %s", out.String(), err, v)
			}
			res, err := create.Create(v, out.Bytes())
			if err != nil {
				t.Fatalf("printed result does not parse as %s: %v", v, err)
			}
			cur, err := current.NewResultFromResult(res)
			if err != nil || len(cur.IPs) != 1 || cur.IPs[0].Address.String() != "10.16.0.5/16" || cur.IPs[0].Gateway.String() != "10.16.0.1" {
				t.Errorf("printed result %s lost the pod's address (%v)", out.String(), err)
			}
		})
	}
	reqs := d.requests()
	want := cni.Request{
		Command: cni.CmdAdd, ContainerID: "0123456789abcdef", Netns: "/run/containerd/netns/cni-1", IfName: "eth0",
		PodName: "web-0", PodNamespace: "default", PodUID: "uid-1", Config: cmdArgs(d.sock, "1.1.0", "").StdinData,
	}
	if len(reqs) != 4 || reqs[3].PodName != want.PodName || reqs[3].PodNamespace != want.PodNamespace ||
		reqs[3].PodUID != want.PodUID || reqs[3].Netns != want.Netns || string(reqs[3].Config) != string(want.Config) {
		t.Errorf("daemon saw %+v, want 4 ADDs like %+v", reqs, want)
	}
}

func TestDel(t *testing.T) {
	d := startDaemon(t)
	args := cmdArgs(d.sock, "1.0.0", "")
	args.Netns = "" // the runtime's later DELs: no netns, sometimes no pod names
	if err := cmdDel(args); err != nil {
		t.Errorf("DEL: %v", err)
	}
	d.del = fmt.Errorf("pod default/web-0: %w", cni.ErrPodNotFound)
	if err := cmdDel(args); err != nil {
		t.Errorf("DEL of a pod the daemon reports gone: %v, want success", err)
	}
	d.del = errors.New("OVS transaction failed")
	err := cmdDel(args)
	var cniErr *types.Error
	if !errors.As(err, &cniErr) || cniErr.Code != types.ErrInternal || !strings.Contains(cniErr.Msg, "OVS transaction failed") {
		t.Errorf("DEL failing in the daemon = %v, want a *types.Error with its message", err)
	}
	if n := len(d.requests()); n != 3 {
		t.Errorf("daemon saw %d DELs, want 3", n)
	}
}

func TestCheckAndStatus(t *testing.T) {
	d := startDaemon(t)
	if err := cmdCheck(cmdArgs(d.sock, "1.0.0", podArgs)); err != nil {
		t.Errorf("CHECK: %v", err)
	}
	d.chk = errors.New("eth0 lacks 10.16.0.5/16")
	var cniErr *types.Error
	if err := cmdCheck(cmdArgs(d.sock, "1.0.0", podArgs)); !errors.As(err, &cniErr) || !strings.Contains(cniErr.Msg, "eth0 lacks") {
		t.Errorf("failing CHECK = %v", err)
	}
	if err := cmdStatus(cmdArgs(d.sock, "1.1.0", "")); err != nil {
		t.Errorf("STATUS: %v", err)
	}
	if err := cmdStatus(cmdArgs(d.sock+".gone", "1.1.0", "")); !errors.As(err, &cniErr) || cniErr.Code != errPluginNotAvailable {
		t.Errorf("STATUS without a daemon = %v, want code %d", err, errPluginNotAvailable)
	}
}

func TestShimErrors(t *testing.T) {
	d := startDaemon(t)
	for _, tc := range []struct {
		desc string
		args *skel.CmdArgs
		code uint
		msg  string
	}{
		{"no pod name", cmdArgs(d.sock, "1.0.0", "K8S_POD_NAMESPACE=default"), types.ErrInvalidEnvironmentVariables, "K8S_POD_NAME"},
		{"malformed CNI_ARGS", cmdArgs(d.sock, "1.0.0", "K8S_POD_NAME"), types.ErrInvalidEnvironmentVariables, "no '='"},
		{"bad mtu", &skel.CmdArgs{ContainerID: "c", Netns: "/n", IfName: "eth0", Args: podArgs,
			StdinData: []byte(`{"cniVersion":"1.0.0","name":"kovn","mtu":10}`)}, types.ErrInvalidNetworkConfig, "mtu 10"},
		{"daemon down", cmdArgs(d.sock+".gone", "1.0.0", podArgs), types.ErrTryAgainLater, "is kovn-daemon running"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			err := cmdAdd(tc.args, &bytes.Buffer{})
			var cniErr *types.Error
			if !errors.As(err, &cniErr) || cniErr.Code != tc.code || !strings.Contains(cniErr.Msg, tc.msg) {
				t.Errorf("ADD = %v, want *types.Error code %d mentioning %q", err, tc.code, tc.msg)
			}
		})
	}
	if n := len(d.requests()); n != 0 {
		t.Errorf("invalid invocations reached the daemon %d times", n)
	}
}
