package rig

import (
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
)

// The node binds need their mount points to exist on the host (/var/lib/kubelet, ...). The rig
// creates the missing ones and records them; the last rig on the host to go down removes them
// (only if still empty). Rigs register themselves so one rig's Down never pulls a mount point
// from under another running rig.
const hostRegistry = "/run/kovn-rig"

// withHostRegistry runs fn holding an exclusive flock on /run, the registry's parent: two rigs
// coming up or going down at once (the e2e tests run some concurrently) must not interleave,
// or the last rig's Down could remove the mount points another rig is registering. The lock is
// on the directory itself, so it leaves no file behind.
func withHostRegistry(fn func() error) error {
	d, err := os.Open(filepath.Dir(hostRegistry))
	if err != nil {
		return err
	}
	defer d.Close()
	if err := syscall.Flock(int(d.Fd()), syscall.LOCK_EX); err != nil {
		return err
	}
	defer syscall.Flock(int(d.Fd()), syscall.LOCK_UN) //nolint:errcheck // closing the fd unlocks too
	return fn()
}

func registerHostUse(prefix string) error {
	return withHostRegistry(func() error { return registerHostUseLocked(prefix) })
}

func registerHostUseLocked(prefix string) error {
	users := filepath.Join(hostRegistry, "users")
	if err := os.MkdirAll(users, 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(users, prefix), nil, 0o644); err != nil {
		return err
	}
	var created []string
	for _, dst := range nodeBindPaths {
		for _, d := range missingDirs(dst) {
			if err := os.Mkdir(d, 0o755); err != nil && !os.IsExist(err) {
				return err
			}
			created = append(created, d)
		}
	}
	if len(created) == 0 {
		return nil
	}
	f, err := os.OpenFile(filepath.Join(hostRegistry, "created-dirs"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = f.WriteString(strings.Join(created, "\n") + "\n")
	return err
}

// missingDirs returns dir and its missing ancestors, outermost first.
func missingDirs(dir string) []string {
	var out []string
	for d := dir; d != "/"; d = filepath.Dir(d) {
		if _, err := os.Stat(d); err == nil {
			break
		}
		out = append([]string{d}, out...)
	}
	return out
}

func releaseHostUse(prefix string) {
	_ = withHostRegistry(func() error { releaseHostUseLocked(prefix); return nil })
}

func releaseHostUseLocked(prefix string) {
	users := filepath.Join(hostRegistry, "users")
	_ = os.Remove(filepath.Join(users, prefix))
	if ents, err := os.ReadDir(users); err == nil && len(ents) > 0 {
		return
	}
	b, _ := os.ReadFile(filepath.Join(hostRegistry, "created-dirs"))
	dirs := strings.Fields(string(b))
	sort.Sort(sort.Reverse(sort.StringSlice(dirs))) // children before parents
	for _, d := range dirs {
		_ = os.Remove(d) // fails, harmlessly, if something else put files there
	}
	_ = os.Remove(filepath.Join(hostRegistry, "created-dirs"))
	_ = os.Remove(users)
	_ = os.Remove(hostRegistry)
}
