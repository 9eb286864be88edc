package rig

import (
	"os"
	"os/exec"
	"slices"
	"testing"
)

func TestChildrenOf(t *testing.T) {
	cmd := exec.Command("sleep", "30")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	if kids := childrenOf(os.Getpid()); !slices.Contains(kids, cmd.Process.Pid) {
		t.Fatalf("childrenOf(self) = %v, want it to contain %d", kids, cmd.Process.Pid)
	}
	if kids := childrenOf(cmd.Process.Pid); len(kids) != 0 {
		t.Fatalf("sleep has children %v", kids)
	}
}
