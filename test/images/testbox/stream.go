package main

import (
	"flag"
	"fmt"
	"net"
	"os"
	"sync"
	"time"

	"golang.org/x/net/icmp"
)

// pingStream sends echo requests at a fixed interval without waiting for replies, so an outage
// shows as a run of lost sequence numbers whose length times the interval is its duration
// (to one interval). It prints the totals and every run of lost requests:
//
//	200 packets transmitted, 197 received
//	lost seq 41-43 (3 x 100ms = 300ms)
//	longest outage 300ms
//	first reply at 1795000000123456789
//
// With -stop-file the stream ends early, before the first request sent after that file
// appears in the container: a test that has watched its event settle stops the stream then
// instead of waiting out a fixed length sized for the slowest case.
//
// The last line, the wall-clock time of the first reply in Unix nanoseconds (pods share the
// host's clock), lets a benchmark time "event -> first packet through" against the event.
func pingStream(args []string) error {
	fs := flag.NewFlagSet("pingstream", flag.ExitOnError)
	count := fs.Int("c", 100, "echo requests to send")
	interval := fs.Duration("i", 100*time.Millisecond, "interval between requests")
	wait := fs.Duration("W", time.Second, "how long to wait for replies after the last request")
	untilReply := fs.Bool("until-reply", false, "stop sending at the first reply (a benchmark's \"first packet through\")")
	stopFile := fs.String("stop-file", "", "stop sending once this file exists")
	_ = fs.Parse(args)
	dst, f, conn, err := listenICMP("pingstream", fs.Arg(0))
	if err != nil {
		return err
	}
	defer conn.Close()
	id := os.Getpid() & 0xffff
	var mu sync.Mutex
	got := map[int]bool{}
	var first time.Time
	done := make(chan struct{})
	go func() {
		defer close(done)
		buf := make([]byte, 1500)
		for {
			n, peer, err := conn.ReadFrom(buf)
			if err != nil {
				return // the deadline after the last request
			}
			m, err := icmp.ParseMessage(f.proto, buf[:n])
			if err != nil || m.Type != f.reply || !peer.(*net.IPAddr).IP.Equal(dst) {
				continue
			}
			if e, ok := m.Body.(*icmp.Echo); ok && e.ID == id {
				mu.Lock()
				if len(got) == 0 {
					first = time.Now()
				}
				got[e.Seq] = true
				mu.Unlock()
			}
		}
	}()
	tick := time.NewTicker(*interval)
	defer tick.Stop()
	sent := 0
	for seq := 1; seq <= *count; seq++ {
		if *untilReply {
			mu.Lock()
			replied := !first.IsZero()
			mu.Unlock()
			if replied {
				break
			}
		}
		if *stopFile != "" {
			if _, err := os.Stat(*stopFile); err == nil {
				break
			}
		}
		sent = seq
		msg := icmp.Message{Type: f.request, Body: &icmp.Echo{ID: id, Seq: seq, Data: []byte("kovn")}}
		b, _ := msg.Marshal(nil)
		_, _ = conn.WriteTo(b, &net.IPAddr{IP: dst}) // a send error is a lost request
		<-tick.C
	}
	_ = conn.SetReadDeadline(time.Now().Add(*wait))
	<-done
	received, longest, run := 0, 0, 0
	report := func(end int) {
		if run > 0 {
			fmt.Printf("lost seq %d-%d (%d x %s = %s)\n", end-run, end-1, run, *interval, time.Duration(run)*(*interval))
			longest = max(longest, run)
		}
		run = 0
	}
	for seq := 1; seq <= sent; seq++ {
		if got[seq] {
			received++
			report(seq)
		} else {
			run++
		}
	}
	report(sent + 1)
	fmt.Printf("%d packets transmitted, %d received\n", sent, received)
	fmt.Printf("longest outage %s\n", time.Duration(longest)*(*interval))
	if !first.IsZero() {
		fmt.Printf("first reply at %d\n", first.UnixNano())
	}
	return nil
}
