package rig

import (
	"syscall"
	"testing"
)

func TestNoInheritedFDs(t *testing.T) {
	fd, err := syscall.Open("/dev/null", syscall.O_RDONLY, 0) // no O_CLOEXEC: like a lock fd flock(1) passes down
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(fd)
	noInheritedFDs()
	flags, _, errno := syscall.Syscall(syscall.SYS_FCNTL, uintptr(fd), syscall.F_GETFD, 0)
	if errno != 0 || flags&syscall.FD_CLOEXEC == 0 {
		t.Fatalf("fd %d flags %#x (errno %v): inherited descriptors would leak into rig processes", fd, flags, errno)
	}
}
