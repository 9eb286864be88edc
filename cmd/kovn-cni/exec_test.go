package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/containernetworking/cni/pkg/types"
)

// TestMain lets the test binary act as the plugin itself, so the tests below run the real
// main (skel's environment parsing, stdout, exit codes) as a runtime would exec it.
func TestMain(m *testing.M) {
	if os.Getenv("KOVN_CNI_TEST_AS_PLUGIN") == "1" {
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// execPlugin runs the plugin like containerd does and returns stdout and the exit code.
func execPlugin(t *testing.T, command, netns, sock string) ([]byte, int) {
	t.Helper()
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(),
		"KOVN_CNI_TEST_AS_PLUGIN=1",
		"CNI_COMMAND="+command,
		"CNI_CONTAINERID=0123456789abcdef",
		"CNI_NETNS="+netns,
		"CNI_IFNAME=eth0",
		"CNI_PATH=/opt/cni/bin",
		"CNI_ARGS="+podArgs,
	)
	cmd.Stdin = strings.NewReader(`{"cniVersion":"1.0.0","name":"kovn","type":"kovn-cni","serverSocket":"` + sock + `"}`)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var exitErr *exec.ExitError
	if err != nil && !errors.As(err, &exitErr) {
		t.Fatalf("running the plugin: %v (stderr: %s)", err, stderr.String())
	}
	return stdout.Bytes(), cmd.ProcessState.ExitCode()
}

func TestPluginProcess(t *testing.T) {
	d := startDaemon(t)
	out, code := execPlugin(t, "ADD", "/run/containerd/netns/cni-1", d.sock)
	var res struct {
		CNIVersion string `json:"cniVersion"`
		IPs        []struct {
			Address string `json:"address"`
		} `json:"ips"`
	}
	if code != 0 || json.Unmarshal(out, &res) != nil || res.CNIVersion != "1.0.0" || len(res.IPs) != 1 || res.IPs[0].Address != "10.16.0.5/16" {
		t.Errorf("ADD exited %d printing %s, want 0 and the daemon's result", code, out)
	}
	if out, code := execPlugin(t, "DEL", "", d.sock); code != 0 || len(bytes.TrimSpace(out)) != 0 {
		t.Errorf("DEL without netns exited %d printing %s, want 0 and nothing", code, out)
	}

	out, code = execPlugin(t, "ADD", "/run/containerd/netns/cni-1", d.sock+".gone")
	var cniErr types.Error
	if code == 0 || json.Unmarshal(out, &cniErr) != nil || cniErr.Code != types.ErrTryAgainLater || !strings.Contains(cniErr.Msg, "kovn-daemon") {
		t.Errorf("ADD without a daemon exited %d printing %s, want a JSON error with code 11", code, out)
	}
}
