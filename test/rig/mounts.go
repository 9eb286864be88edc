package rig

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// setupMounts prepares the supervisor's private mount namespace (ip netns exec made it).
// Nothing here propagates to the host: ip netns exec marks / as a recursive slave.
func (s *supervisor) setupMounts() error {
	if len(s.spec.CgroupRoots) > 0 {
		if err := mountCgroups(s.spec.CgroupRoots); err != nil {
			return fmt.Errorf("cgroups: %w", err)
		}
	}
	for key, val := range s.spec.Sysctls {
		f := filepath.Join(s.spec.Dir, "sysctl_"+strings.ReplaceAll(key, "/", "_"))
		if err := os.WriteFile(f, []byte(val+"\n"), 0o644); err != nil {
			return err
		}
		if err := unix.Mount(f, "/proc/sys/"+key, "", unix.MS_BIND, ""); err != nil {
			return fmt.Errorf("shadow sysctl %s: %w", key, err)
		}
	}
	for _, b := range s.spec.Binds {
		if !b.File {
			if err := os.MkdirAll(b.Src, 0o755); err != nil {
				return err
			}
		}
		if err := unix.Mount(b.Src, b.Dst, "", unix.MS_BIND, ""); err != nil {
			return fmt.Errorf("bind %s on %s: %w", b.Src, b.Dst, err)
		}
	}
	return nil
}

// cgroupHierarchies lists the enabled v1 hierarchies as mount option strings ("cpu",
// "cpu,cpuacct"), grouping controllers that share a hierarchy id in /proc/cgroups.
func cgroupHierarchies() ([]string, error) {
	f, err := os.Open("/proc/cgroups")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	byID := map[string][]string{}
	var order []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fl := strings.Fields(sc.Text())
		if len(fl) < 4 || strings.HasPrefix(fl[0], "#") || fl[1] == "0" || fl[3] != "1" {
			continue
		}
		if _, ok := byID[fl[1]]; !ok {
			order = append(order, fl[1])
		}
		byID[fl[1]] = append(byID[fl[1]], fl[0])
	}
	var out []string
	for _, id := range order {
		out = append(out, strings.Join(byID[id], ","))
	}
	return out, sc.Err()
}

// mountCgroups remounts the v1 hierarchies plus name=systemd and the unified v2 tree, then
// creates each cgroup root in every hierarchy (kubelet refuses to start otherwise).
func mountCgroups(roots []string) error {
	hs, err := cgroupHierarchies()
	if err != nil {
		return err
	}
	const base = "/sys/fs/cgroup"
	if err := unix.Mount("cgroup", base, "tmpfs", 0, "mode=755"); err != nil {
		return err
	}
	var dirs []string
	for _, h := range hs {
		d := filepath.Join(base, h)
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
		if err := unix.Mount("cgroup", d, "cgroup", 0, h); err != nil {
			return fmt.Errorf("mount cgroup %s: %w", h, err)
		}
		dirs = append(dirs, d)
		// kubelet looks controllers up by name: link co-mounted ones (cpu,cpuacct -> cpu, cpuacct)
		for _, c := range strings.Split(h, ",") {
			if c != h {
				_ = os.Symlink(h, filepath.Join(base, c))
			}
		}
	}
	sd := filepath.Join(base, "systemd")
	_ = os.MkdirAll(sd, 0o755)
	if err := unix.Mount("cgroup", sd, "cgroup", 0, "none,name=systemd"); err != nil {
		return fmt.Errorf("mount name=systemd: %w", err)
	}
	dirs = append(dirs, sd)
	ud := filepath.Join(base, "unified")
	_ = os.MkdirAll(ud, 0o755)
	if err := unix.Mount("cgroup2", ud, "cgroup2", 0, ""); err != nil {
		return fmt.Errorf("mount cgroup2: %w", err)
	}
	for _, root := range roots {
		for _, d := range dirs {
			if err := os.MkdirAll(filepath.Join(d, root), 0o755); err != nil {
				return err
			}
		}
		cs := filepath.Join(base, "cpuset")
		for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
			if v, err := os.ReadFile(filepath.Join(cs, f)); err == nil {
				_ = os.WriteFile(filepath.Join(cs, root, f), v, 0o644)
			}
		}
	}
	return nil
}

// cgroupBase holds the host's cgroup hierarchies.
const cgroupBase = "/sys/fs/cgroup"

// removeCgroupRoot deletes a cgroup root depth-first in every host hierarchy (Down). A
// directory that cannot go still holds a process the rig failed to stop: that is an error.
func removeCgroupRoot(root string) error {
	var err error
	for try := 0; try < 20; try++ {
		if err = removeCgroupRootOnce(root); err == nil {
			return nil
		}
		killCgroupProcs(root)
		time.Sleep(250 * time.Millisecond)
	}
	return err
}

// killCgroupProcs SIGKILLs every process still in a cgroup root of the rig: a pod's containers
// whose shim stopped before them (CI once found a pod's pause and server reparented to init
// after rig down, holding the node's cgroups). Only the rig's own processes are there: the
// root is unique to the rig (Config.CgroupRoot) and only its node's kubelet places pods in it.
func killCgroupProcs(root string) {
	ents, _ := os.ReadDir(cgroupBase)
	for _, e := range ents {
		_ = filepath.WalkDir(filepath.Join(cgroupBase, e.Name(), root), func(p string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() || d.Name() != "cgroup.procs" {
				return nil
			}
			b, _ := os.ReadFile(p)
			for _, f := range strings.Fields(string(b)) {
				if pid, err := strconv.Atoi(f); err == nil && pid > 1 {
					_ = syscall.Kill(pid, syscall.SIGKILL)
				}
			}
			return nil
		})
	}
}

func removeCgroupRootOnce(root string) error {
	var left []string
	ents, _ := os.ReadDir(cgroupBase)
	for _, e := range ents {
		top := filepath.Join(cgroupBase, e.Name(), root)
		if _, err := os.Stat(top); err != nil {
			continue
		}
		var dirs []string
		_ = filepath.WalkDir(top, func(p string, d os.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, p)
			}
			return nil
		})
		for i := len(dirs) - 1; i >= 0; i-- {
			_ = unix.Rmdir(dirs[i])
		}
		if _, err := os.Stat(top); err == nil {
			left = append(left, top)
		}
	}
	if len(left) > 0 {
		return fmt.Errorf("cgroups still in use (a process of the rig survived): %v", left)
	}
	return nil
}
