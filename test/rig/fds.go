package rig

import (
	"os"
	"strconv"
	"sync"
	"syscall"
)

var cloexecOnce sync.Once

// noInheritedFDs marks every file descriptor this process inherited (beyond stdio) close-on-
// exec, once. Rig processes outlive the command that started them; without this they would
// keep whatever their starter held open — e.g. the lock of `flock LOCK kovn-rig up`, which
// then stays held until the rig is down, and a later `flock LOCK kovn-rig down` waits forever.
func noInheritedFDs() {
	cloexecOnce.Do(func() {
		entries, err := os.ReadDir("/proc/self/fd")
		if err != nil {
			return
		}
		for _, e := range entries {
			if fd, err := strconv.Atoi(e.Name()); err == nil && fd > 2 {
				syscall.CloseOnExec(fd)
			}
		}
	})
}
