// Command kovn-testbox is the test pod image's only binary (an agnhost/busybox stand-in built
// from Go, so tests need no registry):
//
//	testbox sleep                    block until SIGTERM
//	testbox serve [-http :8080] [-tcp :9000]   HTTP server answering its hostname, TCP echo server
//	testbox ping [-c N] [-W secs] IP  ICMP or ICMPv6 echo (needs CAP_NET_RAW, pods run as root)
//	testbox get URL                  HTTP GET, prints the body
//	testbox tcp ADDR MSG             connect, send MSG, print the echo
//	testbox connect ADDR             open a TCP connection and close it (any listener will do)
//	testbox ip                       print each interface (MAC, MTU, addresses) and the routes of both families
//	testbox rs [-i IFACE]            send an IPv6 router solicitation, print the advertisement answering it
package main

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"golang.org/x/net/icmp"
	"golang.org/x/net/ipv4"
	"golang.org/x/net/ipv6"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: testbox sleep|serve|ping|get|tcp ...")
		os.Exit(2)
	}
	var err error
	switch args := os.Args[2:]; os.Args[1] {
	case "sleep":
		waitSignal()
	case "serve":
		err = serve(args)
	case "ping":
		err = ping(args)
	case "get":
		err = get(args)
	case "tcp":
		err = tcpSend(args)
	case "connect":
		err = connect(args)
	case "ip":
		err = showIP()
	case "rs":
		err = routerSolicit(args)
	default:
		err = fmt.Errorf("unknown command %q", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "testbox:", err)
		os.Exit(1)
	}
}

func waitSignal() {
	c := make(chan os.Signal, 1)
	signal.Notify(c, syscall.SIGTERM, syscall.SIGINT)
	<-c
}

func serve(args []string) error {
	fs := flag.NewFlagSet("serve", flag.ExitOnError)
	httpAddr := fs.String("http", ":8080", "HTTP listen address")
	tcpAddr := fs.String("tcp", ":9000", "TCP echo listen address")
	_ = fs.Parse(args)
	host, _ := os.Hostname()
	http.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "%s %s\n", host, r.RemoteAddr)
	})
	ln, err := net.Listen("tcp", *tcpAddr)
	if err != nil {
		return err
	}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { defer c.Close(); _, _ = io.Copy(c, c) }()
		}
	}()
	go func() { _ = http.ListenAndServe(*httpAddr, nil) }()
	waitSignal()
	return nil
}

func ping(args []string) error {
	fs := flag.NewFlagSet("ping", flag.ExitOnError)
	count := fs.Int("c", 3, "echo requests to send")
	wait := fs.Duration("W", 2*time.Second, "time to wait for each reply")
	_ = fs.Parse(args)
	dst := net.ParseIP(fs.Arg(0))
	if dst == nil {
		return fmt.Errorf("ping: want an IPv4 or IPv6 address, got %q", fs.Arg(0))
	}
	f := icmpV4
	if dst.To4() == nil {
		f = icmpV6
	}
	conn, err := icmp.ListenPacket(f.network, f.any)
	if err != nil {
		return err
	}
	defer conn.Close()
	got := 0
	for seq := 1; seq <= *count; seq++ {
		msg := icmp.Message{Type: f.request, Body: &icmp.Echo{ID: os.Getpid() & 0xffff, Seq: seq, Data: []byte("kovn")}}
		b, _ := msg.Marshal(nil) // the kernel fills the ICMPv6 checksum
		start := time.Now()
		if _, err := conn.WriteTo(b, &net.IPAddr{IP: dst}); err != nil {
			return err
		}
		if echoReply(conn, f, dst, seq, start.Add(*wait)) {
			got++
			fmt.Printf("reply from %s seq=%d time=%s\n", dst, seq, time.Since(start).Round(time.Microsecond))
		}
		time.Sleep(200 * time.Millisecond)
	}
	fmt.Printf("%d packets transmitted, %d received\n", *count, got)
	if got == 0 {
		return fmt.Errorf("no reply from %s", dst)
	}
	return nil
}

// icmpFamily is what differs between ICMP and ICMPv6 echo.
type icmpFamily struct {
	network, any   string
	proto          int
	request, reply icmp.Type
}

var (
	icmpV4 = icmpFamily{"ip4:icmp", "0.0.0.0", 1, ipv4.ICMPTypeEcho, ipv4.ICMPTypeEchoReply}
	icmpV6 = icmpFamily{"ip6:ipv6-icmp", "::", 58, ipv6.ICMPTypeEchoRequest, ipv6.ICMPTypeEchoReply}
)

func echoReply(conn *icmp.PacketConn, f icmpFamily, dst net.IP, seq int, deadline time.Time) bool {
	buf := make([]byte, 1500)
	_ = conn.SetReadDeadline(deadline)
	for {
		n, peer, err := conn.ReadFrom(buf)
		if err != nil {
			return false
		}
		m, err := icmp.ParseMessage(f.proto, buf[:n])
		if err != nil || m.Type != f.reply || !peer.(*net.IPAddr).IP.Equal(dst) {
			continue
		}
		if e, ok := m.Body.(*icmp.Echo); ok && e.Seq == seq && e.ID == os.Getpid()&0xffff {
			return true
		}
	}
}

func get(args []string) error {
	if len(args) != 1 {
		return fmt.Errorf("get: want one URL")
	}
	cl := &http.Client{Timeout: 5 * time.Second}
	resp, err := cl.Get(args[0])
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	_, err = io.Copy(os.Stdout, resp.Body)
	return err
}

func tcpSend(args []string) error {
	if len(args) != 2 {
		return fmt.Errorf("tcp: want ADDR MSG")
	}
	c, err := net.DialTimeout("tcp", args[0], 5*time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := fmt.Fprintln(c, args[1]); err != nil {
		return err
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	fmt.Print(line)
	return err
}

func connect(args []string) error {
	if len(args) != 1 {
		return fmt.Errorf("connect: want ADDR")
	}
	c, err := net.DialTimeout("tcp", args[0], 5*time.Second)
	if err != nil {
		return err
	}
	fmt.Printf("connected %s -> %s\n", c.LocalAddr(), c.RemoteAddr())
	return c.Close()
}

func showIP() error {
	ifs, err := net.Interfaces()
	if err != nil {
		return err
	}
	for _, i := range ifs {
		addrs, _ := i.Addrs()
		fmt.Printf("%s mac=%s mtu=%d", i.Name, i.HardwareAddr, i.MTU)
		for _, a := range addrs {
			fmt.Printf(" %s", a)
		}
		fmt.Println()
	}
	return printRoutes()
}
