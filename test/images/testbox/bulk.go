package main

import (
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// tcpRecv accepts -n TCP connections on the port and reads them to their end, printing what
// arrived (all connections together) in each interval, so a test sees a rate change over
// time, not only the average:
//
//	1795000000100000000 1250000 1311000   (the interval's end in Unix nanoseconds, TCP payload
//	...                                    bytes received, bytes the interface received)
//
// The interface's count (-iface's rx_bytes: whole Ethernet frames) is what a bandwidth limit
// on the pod's port meters; the payload is what an application sees, 94-95 % of it.
//
//	total 62500000 5.002           (bytes, seconds from the first byte to the last)
//
// Pods share the host's clock, so a test can line the intervals up with what it changed.
func tcpRecv(args []string) error {
	fs := flag.NewFlagSet("tcprecv", flag.ExitOnError)
	port := fs.Int("p", 5201, "TCP port to listen on (both families)")
	conns := fs.Int("n", 1, "connections to receive (tcpsend -P)")
	interval := fs.Duration("i", 100*time.Millisecond, "reporting interval")
	iface := fs.String("iface", "eth0", "interface whose received bytes are reported beside the payload")
	timeout := fs.Duration("t", 60*time.Second, "give up when the connections did not come within this long")
	_ = fs.Parse(args)
	ln, err := net.Listen("tcp", fmt.Sprintf(":%d", *port))
	if err != nil {
		return err
	}
	defer ln.Close()
	_ = ln.(*net.TCPListener).SetDeadline(time.Now().Add(*timeout))
	var got atomic.Int64
	var mu sync.Mutex
	var first, last time.Time
	var wg sync.WaitGroup
	for i := 0; i < *conns; i++ {
		conn, err := ln.Accept()
		if err != nil {
			return err
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer conn.Close()
			buf := make([]byte, 256<<10)
			for {
				n, err := conn.Read(buf)
				if n > 0 {
					now := time.Now()
					mu.Lock()
					if first.IsZero() {
						first = now
					}
					last = now
					mu.Unlock()
					got.Add(int64(n))
				}
				if err != nil {
					return
				}
			}
		}()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	rxPath := "/sys/class/net/" + *iface + "/statistics/rx_bytes"
	rx := func() int64 {
		b, _ := os.ReadFile(rxPath)
		n, _ := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
		return n
	}
	tick := time.NewTicker(*interval)
	defer tick.Stop()
	var total int64
	lastRx := rx()
	for {
		select {
		case now := <-tick.C:
			n := got.Swap(0)
			total += n
			r := rx()
			fmt.Printf("%d %d %d\n", now.UnixNano(), n, r-lastRx)
			lastRx = r
		case <-done:
			total += got.Swap(0)
			fmt.Printf("total %d %.3f\n", total, last.Sub(first).Seconds())
			return nil
		}
	}
}

// tcpBulkSend opens -P connections to ADDR (retrying while nothing listens yet) and sends on
// each as fast as TCP lets it for the duration, then closes them.
func tcpBulkSend(args []string) error {
	fs := flag.NewFlagSet("tcpsend", flag.ExitOnError)
	duration := fs.Duration("t", 5*time.Second, "how long to send")
	parallel := fs.Int("P", 1, "parallel connections")
	_ = fs.Parse(args)
	if fs.NArg() != 1 {
		return errors.New("usage: testbox tcpsend [-t D] [-P N] ADDR")
	}
	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for i := 0; i < *parallel; i++ {
		var conn net.Conn
		var err error
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
			if conn, err = net.DialTimeout("tcp", fs.Arg(0), 2*time.Second); err == nil || time.Now().After(deadline) {
				break
			}
		}
		if err != nil {
			return err
		}
		conns = append(conns, conn)
	}
	end := time.Now().Add(*duration)
	var sent atomic.Int64
	errs := make(chan error, len(conns))
	for _, c := range conns {
		go func(c net.Conn) { errs <- sendUntil(c, end, &sent) }(c)
	}
	for range conns {
		if err := <-errs; err != nil {
			return err
		}
	}
	fmt.Printf("sent %d\n", sent.Load())
	return nil
}

// sendUntil writes to c until end (its write deadline), then closes it.
func sendUntil(c net.Conn, end time.Time, sent *atomic.Int64) error {
	defer c.Close()
	buf := make([]byte, 64<<10)
	_ = c.SetWriteDeadline(end)
	for time.Now().Before(end) {
		n, err := c.Write(buf)
		sent.Add(int64(n))
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				return nil
			}
			return err
		}
	}
	return nil
}
