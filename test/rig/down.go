package rig

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Down stops every process the rig started (by pid), deletes its namespaces and cgroups and
// removes its files. It also cleans up after a rig whose processes died or whose Up failed.
// With keepLogs the state dir's logs stay (everything else goes).
func Down(dir string, keepLogs bool) error {
	cfg, err := Config{Dir: dir}.Defaults()
	if err != nil {
		return err
	}
	unlock, err := lockDir(cfg.Dir)
	if err != nil {
		return err
	}
	defer unlock()
	st, err := LoadState(cfg.Dir)
	if err != nil {
		st = &State{Config: cfg} // nothing recorded: still sweep namespaces with our prefix
	}
	cfg = st.Config
	all := st.AllProcs()
	// Supervisors first: each stops its own children in order and kills what it adopted.
	var wg sync.WaitGroup
	for _, p := range st.Procs {
		wg.Add(1)
		go func(pid int) { defer wg.Done(); stopPid(pid, 40*time.Second) }(p.Pid)
	}
	wg.Wait()
	for _, p := range all { // anything a dead supervisor left behind
		if Alive(p.Pid) {
			_ = syscall.Kill(p.Pid, syscall.SIGKILL)
		}
	}
	var errs []error
	seen := map[string]bool{}
	for _, ns := range append(st.Namespaces, rigNamespaces(cfg.Prefix)...) {
		if seen[ns] || !netnsExists(ns) {
			continue
		}
		seen[ns] = true
		if err := ipCmd("netns", "del", ns); err != nil {
			errs = append(errs, err)
		}
	}
	for _, cg := range st.Cgroups {
		if err := removeCgroupRoot(cg); err != nil {
			errs = append(errs, err)
		}
	}
	_ = os.RemoveAll(cfg.runDir())
	releaseHostUse(cfg.Prefix)
	if err := removeState(cfg.Dir, keepLogs); err != nil {
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		return fmt.Errorf("rig down: %v", errs)
	}
	return nil
}

// removeState deletes the state dir; with keepLogs every file but the logs goes, so a later
// Up in the same dir starts from fresh databases.
func removeState(dir string, keepLogs bool) error {
	if !keepLogs {
		return os.RemoveAll(dir)
	}
	return filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || strings.HasSuffix(p, ".log") || d.Name() == errorMarker || d.Name() == ".lock" {
			return nil
		}
		return os.Remove(p)
	})
}
