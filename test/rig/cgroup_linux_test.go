package rig

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
)

// TestRemoveCgroupRootKillsSurvivors: a process left in a rig's cgroup root (a pod's container
// whose shim stopped first) is killed, and the root removed, instead of failing rig down.
func TestRemoveCgroupRootKillsSurvivors(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("needs root (cgroups)")
	}
	var hier string
	ents, _ := os.ReadDir(cgroupBase)
	for _, e := range ents {
		if _, err := os.Stat(filepath.Join(cgroupBase, e.Name(), "cgroup.procs")); err == nil {
			hier = filepath.Join(cgroupBase, e.Name())
			break
		}
	}
	if hier == "" {
		t.Fatalf("no cgroup hierarchy with cgroup.procs under %s", cgroupBase)
	}
	root := fmt.Sprintf("kovn-test-%d", os.Getpid())
	leaf := filepath.Join(hier, root, "kubepods", "pod1")
	if err := os.MkdirAll(leaf, 0o755); err != nil {
		t.Fatal(err)
	}
	sleep := exec.Command("sleep", "300")
	if err := sleep.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { // on failure: nothing of the test left behind
		if sleep.Process.Kill() == nil {
			_ = sleep.Wait()
		}
		_ = removeCgroupRootOnce(root)
	}()
	if err := os.WriteFile(filepath.Join(leaf, "cgroup.procs"), []byte(strconv.Itoa(sleep.Process.Pid)), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := removeCgroupRootOnce(root); err == nil {
		t.Fatal("a cgroup root holding a process was removed")
	}
	if err := removeCgroupRoot(root); err != nil {
		t.Fatal(err)
	}
	err := sleep.Wait()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Errorf("the process in the cgroup ended with %v, want killed", err)
	}
	if _, err := os.Stat(filepath.Join(hier, root)); !os.IsNotExist(err) {
		t.Errorf("%s still there (%v)", filepath.Join(hier, root), err)
	}
}
