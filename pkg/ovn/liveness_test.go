package ovn_test

import (
	"context"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kovn/kovn/pkg/ovn"
	"github.com/kovn/kovn/pkg/ovn/ovntest"
)

// pausableProxy forwards a unix socket to the server's; while paused it swallows what either
// side sends, as a partitioned network does: the connection stays up, nothing answers.
type pausableProxy struct{ paused atomic.Bool }

func (p *pausableProxy) serve(t *testing.T, upstream string) string {
	sock := ovntest.SocketPath(t)
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			down, err := ln.Accept()
			if err != nil {
				return
			}
			up, err := net.Dial("unix", upstream)
			if err != nil {
				down.Close()
				continue
			}
			go p.copy(up, down)
			go p.copy(down, up)
		}
	}()
	return "unix:" + sock
}

func (p *pausableProxy) copy(dst, src net.Conn) {
	defer dst.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 && !p.paused.Load() {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

func TestLivenessSeesAPartition(t *testing.T) {
	endpoint := ovntest.ServeNB(t)
	var proxy pausableProxy
	c := connectNB(t, proxy.serve(t, endpoint[len("unix:"):]))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	l := ovn.WatchLiveness(ctx, c, 50*time.Millisecond)
	if !l.Answers() {
		t.Fatal("a database that answers: Answers is false on return")
	}
	flips := make(chan bool, 4)
	l.OnChange(func(answers bool) { flips <- answers })

	proxy.paused.Store(true)
	if got := waitFlip(t, flips); got {
		t.Fatal("partitioned: the verdict flipped to answering")
	}
	if l.Answers() || !c.Connected() {
		t.Fatalf("partitioned: Answers %t, libovsdb Connected %t (want false, and true: the blind spot)", l.Answers(), c.Connected())
	}
	proxy.paused.Store(false)
	if got := waitFlip(t, flips); !got {
		t.Fatal("healed: the verdict flipped to not answering")
	}
	if !l.Answers() {
		t.Fatal("healed: Answers is false")
	}
}

func waitFlip(t *testing.T, flips <-chan bool) bool {
	t.Helper()
	select {
	case v := <-flips:
		return v
	case <-time.After(5 * time.Second):
		t.Fatal("the verdict did not change within 5 s")
		return false
	}
}

func TestLivenessOfNothing(t *testing.T) {
	if ovn.WatchLiveness(context.Background(), nil, 0).Answers() {
		t.Fatal("a nil client answers")
	}
	var l *ovn.Liveness
	if l.Answers() {
		t.Fatal("a nil Liveness answers")
	}
}
