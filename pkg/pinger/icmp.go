package pinger

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/net/icmp"
	"golang.org/x/net/ipv4"
	"golang.org/x/net/ipv6"
)

// echoer sends ICMP or ICMPv6 echo requests from one raw socket and matches the replies by
// the socket's own identifier and a sequence number per request, so any number of probes
// may wait at once.
type echoer struct {
	conn  *icmp.PacketConn
	fam   icmpFamily
	id    int
	seq   atomic.Uint32
	mu    sync.Mutex
	await map[int]pending
}

type pending struct {
	dst   netip.Addr
	reply chan struct{}
}

type icmpFamily struct {
	network, any   string
	proto          int
	request, reply icmp.Type
}

var (
	icmpV4 = icmpFamily{"ip4:icmp", "0.0.0.0", 1, ipv4.ICMPTypeEcho, ipv4.ICMPTypeEchoReply}
	icmpV6 = icmpFamily{"ip6:ipv6-icmp", "::", 58, ipv6.ICMPTypeEchoRequest, ipv6.ICMPTypeEchoReply}
)

func newEchoer(f icmpFamily) (*echoer, error) {
	conn, err := icmp.ListenPacket(f.network, f.any)
	if err != nil {
		return nil, fmt.Errorf("ICMP socket %s (needs CAP_NET_RAW): %w", f.network, err)
	}
	e := &echoer{conn: conn, fam: f, id: rand.IntN(0xffff), await: map[int]pending{}}
	go e.read()
	return e, nil
}

func (e *echoer) close() { e.conn.Close() }

// read delivers each echo reply carrying the socket's identifier to its waiting probe.
func (e *echoer) read() {
	buf := make([]byte, 1500)
	for {
		n, peer, err := e.conn.ReadFrom(buf)
		if err != nil {
			return // closed
		}
		m, err := icmp.ParseMessage(e.fam.proto, buf[:n])
		if err != nil || m.Type != e.fam.reply {
			continue
		}
		echo, ok := m.Body.(*icmp.Echo)
		if !ok || echo.ID != e.id {
			continue
		}
		from, _ := netip.AddrFromSlice(peer.(*net.IPAddr).IP)
		e.mu.Lock()
		p, ok := e.await[echo.Seq]
		if ok && p.dst == from.Unmap() {
			delete(e.await, echo.Seq)
			close(p.reply)
		}
		e.mu.Unlock()
	}
}

// echo sends one request to dst and waits up to timeout for its reply: the round trip, or
// false when none came.
func (e *echoer) echo(ctx context.Context, dst netip.Addr, timeout time.Duration) (time.Duration, bool) {
	seq := int(e.seq.Add(1) & 0xffff)
	p := pending{dst: dst, reply: make(chan struct{})}
	e.mu.Lock()
	e.await[seq] = p
	e.mu.Unlock()
	defer func() {
		e.mu.Lock()
		delete(e.await, seq)
		e.mu.Unlock()
	}()
	msg := icmp.Message{Type: e.fam.request, Body: &icmp.Echo{ID: e.id, Seq: seq, Data: []byte("kovn-pinger")}}
	b, err := msg.Marshal(nil) // the kernel fills the ICMPv6 checksum
	if err != nil {
		return 0, false
	}
	start := time.Now()
	if _, err := e.conn.WriteTo(b, &net.IPAddr{IP: dst.AsSlice()}); err != nil {
		return 0, false
	}
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-p.reply:
		return time.Since(start), true
	case <-t.C:
	case <-ctx.Done():
	}
	return 0, false
}
