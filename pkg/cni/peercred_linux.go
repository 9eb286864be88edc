package cni

import (
	"context"
	"net"

	"golang.org/x/sys/unix"
)

type peerPIDKey struct{}

// withPeerPID stores the connecting process's pid (SO_PEERCRED, already translated into
// the daemon's pid namespace; 0 when the shim is not visible there) in the connection's
// context.
func withPeerPID(ctx context.Context, c net.Conn) context.Context {
	uc, ok := c.(*net.UnixConn)
	if !ok {
		return ctx
	}
	raw, err := uc.SyscallConn()
	if err != nil {
		return ctx
	}
	var cred *unix.Ucred
	ctrlErr := raw.Control(func(fd uintptr) {
		cred, err = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	})
	if ctrlErr != nil || err != nil || cred == nil || cred.Pid <= 0 {
		return ctx
	}
	return context.WithValue(ctx, peerPIDKey{}, int(cred.Pid))
}

// PeerPID returns the pid of the shim that sent the request handled under ctx, when the
// Server could see it.
func PeerPID(ctx context.Context) (int, bool) {
	pid, ok := ctx.Value(peerPIDKey{}).(int)
	return pid, ok && pid > 0
}
