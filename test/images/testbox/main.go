// Command kovn-testbox is the test pod image's only binary (an agnhost/busybox stand-in built
// from Go, so tests need no registry):
//
//	testbox sleep                    block until SIGTERM
//	testbox serve [-http :8080] [-tcp :9000] [-udp :9001]   HTTP server answering its hostname and
//	                                 the client address, TCP echo, UDP answering "HOSTNAME MSG"
//	testbox udp [-n N] [-i D] [-W D] [-each] [-sport P] ADDR MSG   send N datagrams D apart from one socket
//	                                 (one flow; -each: a new socket each), print each answer or "timeout"
//	testbox touch PATH               create an empty file (/tmp/unready fails serve's /healthz)
//	testbox probe [-t D] ADDR...     TCP-connect to every ADDR at once, print "ADDR ok" or "ADDR fail"
//	testbox ping [-c N] [-W secs] IP  ICMP or ICMPv6 echo (needs CAP_NET_RAW, pods run as root)
//	testbox get [-n N] URL           HTTP GET N times, each on a new connection, prints the bodies
//	testbox tcp ADDR MSG             connect, send MSG, print the echo
//	testbox connect ADDR             open a TCP connection and close it (any listener will do);
//	                                 prints how long the connection (or its refusal) took
//	testbox ip                       print each interface (MAC, MTU, addresses) and the routes of both families
//	testbox rs [-i IFACE]            send an IPv6 router solicitation, print the advertisement answering it
//	testbox tcprecv [-p P] [-n N] [-i D]   receive N TCP streams, print the bytes of each interval D and the total
//	testbox tcpsend [-t D] [-P N] ADDR     send N TCP streams as fast as they go for D
package main

import (
	"bufio"
	"crypto/tls"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/net/icmp"
	"golang.org/x/net/ipv4"
	"golang.org/x/net/ipv6"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: testbox sleep|serve|ping|pingstream|get|getstream|tcp|dns ...")
		os.Exit(2)
	}
	var err error
	switch args := os.Args[2:]; os.Args[1] {
	case "sleep": // until SIGTERM, or for the duration given (a preStop hook's delay)
		if len(args) == 1 {
			var d time.Duration
			if d, err = time.ParseDuration(args[0]); err == nil {
				time.Sleep(d)
			}
			break
		}
		waitSignal()
	case "serve":
		err = serve(args)
	case "ping":
		err = ping(args)
	case "pingstream":
		err = pingStream(args)
	case "get":
		err = get(args)
	case "getstream":
		err = getStream(args)
	case "tcp":
		err = tcpSend(args)
	case "connect":
		err = connect(args)
	case "udp":
		err = udpSend(args)
	case "touch":
		err = touch(args)
	case "probe":
		err = probe(args)
	case "ip":
		err = showIP()
	case "rs":
		err = routerSolicit(args)
	case "dns":
		err = dnsLookup(args)
	case "tcprecv":
		err = tcpRecv(args)
	case "tcpsend":
		err = tcpBulkSend(args)
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
	udpAddr := fs.String("udp", ":9001", "UDP listen address: answers each datagram with 'HOSTNAME DATAGRAM'")
	_ = fs.Parse(args)
	host, _ := os.Hostname()
	http.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "%s %s\n", host, r.RemoteAddr)
	})
	// A readiness probe target a test can fail on purpose: `testbox touch /tmp/unready`.
	http.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) {
		if _, err := os.Stat("/tmp/unready"); err == nil {
			http.Error(w, "unready", http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ok")
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
	pc, err := net.ListenPacket("udp", *udpAddr)
	if err != nil {
		return err
	}
	go udpEcho(pc, host)
	waitSignal()
	return nil
}

func ping(args []string) error {
	fs := flag.NewFlagSet("ping", flag.ExitOnError)
	count := fs.Int("c", 3, "echo requests to send")
	wait := fs.Duration("W", 2*time.Second, "time to wait for each reply")
	_ = fs.Parse(args)
	dst, f, conn, err := listenICMP("ping", fs.Arg(0))
	if err != nil {
		return err
	}
	defer conn.Close()
	// A reply is counted whenever it arrives before the run ends, as ping(8) counts it: a reply
	// slower than -W is late, not lost, and is printed as such so a stall and a drop differ.
	sent := map[int]time.Time{}
	got := map[int]bool{}
	for seq := 1; seq <= *count; seq++ {
		msg := icmp.Message{Type: f.request, Body: &icmp.Echo{ID: os.Getpid() & 0xffff, Seq: seq, Data: []byte("kovn")}}
		b, _ := msg.Marshal(nil) // the kernel fills the ICMPv6 checksum
		sent[seq] = time.Now()
		if _, err := conn.WriteTo(b, &net.IPAddr{IP: dst}); err != nil {
			return err
		}
		awaitReplies(conn, f, dst, seq, sent, got, sent[seq].Add(*wait))
		time.Sleep(200 * time.Millisecond)
	}
	var lost []string
	for seq := 1; seq <= *count; seq++ {
		if !got[seq] {
			lost = append(lost, strconv.Itoa(seq))
		}
	}
	fmt.Printf("%d packets transmitted, %d received\n", *count, len(got))
	if len(lost) > 0 {
		fmt.Printf("no reply to seq %s\n", strings.Join(lost, ","))
	}
	if len(got) == 0 {
		return fmt.Errorf("no reply from %s", dst)
	}
	return nil
}

// listenICMP parses the destination of an echo command and opens the ICMP socket of its family.
func listenICMP(cmd, arg string) (net.IP, icmpFamily, *icmp.PacketConn, error) {
	dst := net.ParseIP(arg)
	if dst == nil {
		return nil, icmpFamily{}, nil, fmt.Errorf("%s: want an IPv4 or IPv6 address, got %q", cmd, arg)
	}
	f := icmpV4
	if dst.To4() == nil {
		f = icmpV6
	}
	conn, err := icmp.ListenPacket(f.network, f.any)
	return dst, f, conn, err
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

// awaitReplies reads echo replies until the one to seq arrives or the deadline passes, counting
// (and printing) any reply to an earlier request that had not been answered yet.
func awaitReplies(conn *icmp.PacketConn, f icmpFamily, dst net.IP, seq int, sent map[int]time.Time, got map[int]bool, deadline time.Time) {
	buf := make([]byte, 1500)
	_ = conn.SetReadDeadline(deadline)
	for !got[seq] {
		n, peer, err := conn.ReadFrom(buf)
		if err != nil {
			return
		}
		m, err := icmp.ParseMessage(f.proto, buf[:n])
		if err != nil || m.Type != f.reply || !peer.(*net.IPAddr).IP.Equal(dst) {
			continue
		}
		e, ok := m.Body.(*icmp.Echo)
		if !ok || e.ID != os.Getpid()&0xffff || e.Seq < 1 || e.Seq > seq || got[e.Seq] {
			continue
		}
		got[e.Seq] = true
		late := ""
		if e.Seq != seq {
			late = " (late)"
		}
		fmt.Printf("reply from %s seq=%d time=%s%s\n", dst, e.Seq, time.Since(sent[e.Seq]).Round(time.Microsecond), late)
	}
}

func get(args []string) error {
	fs := flag.NewFlagSet("get", flag.ExitOnError)
	n := fs.Int("n", 1, "requests to make, each on a new connection; every answer is printed")
	status := fs.Bool("status", false, "print each answer's status code (\"status 503\") before its body; any status counts as an answer")
	tokenFile := fs.String("token-file", "", "send the bearer token in this file (https: the server's self-signed certificate is not verified)")
	_ = fs.Parse(args)
	if fs.NArg() != 1 {
		return fmt.Errorf("get: want one URL")
	}
	var token string
	if *tokenFile != "" {
		b, err := os.ReadFile(*tokenFile)
		if err != nil {
			return err
		}
		token = strings.TrimSpace(string(b))
	}
	// A new connection per request, so a load balancer picks a backend for each. Metrics
	// servers present self-signed certificates: the test checks the token's rights, not them.
	cl := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true,
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // self-signed metrics servers
	var failed int
	for i := 0; i < *n; i++ {
		req, err := http.NewRequest(http.MethodGet, fs.Arg(0), nil)
		if err != nil {
			return err
		}
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := cl.Do(req)
		if err != nil {
			fmt.Println("error:", err)
			failed++
			continue
		}
		if *status {
			fmt.Printf("status %d\n", resp.StatusCode)
		}
		_, _ = io.Copy(os.Stdout, resp.Body)
		resp.Body.Close()
	}
	if failed > 0 {
		return fmt.Errorf("%d of %d requests failed", failed, *n)
	}
	return nil
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
	start := time.Now()
	c, err := net.DialTimeout("tcp", args[0], 5*time.Second)
	took := time.Since(start)
	if err != nil {
		return fmt.Errorf("after %dms: %w", took.Milliseconds(), err)
	}
	fmt.Printf("connected %s -> %s in %dms\n", c.LocalAddr(), c.RemoteAddr(), took.Milliseconds())
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

func udpEcho(pc net.PacketConn, host string) {
	buf := make([]byte, 65536) // a datagram larger than the MTU arrives whole, reassembled
	for {
		n, from, err := pc.ReadFrom(buf)
		if err != nil {
			return
		}
		_, _ = pc.WriteTo([]byte(host+" "+string(buf[:n])), from)
	}
}

func udpSend(args []string) error {
	fs := flag.NewFlagSet("udp", flag.ExitOnError)
	n := fs.Int("n", 1, "datagrams to send")
	interval := fs.Duration("i", 100*time.Millisecond, "time between datagrams")
	wait := fs.Duration("W", 500*time.Millisecond, "time to wait for each answer")
	each := fs.Bool("each", false, "send each datagram from a new socket (a new flow), instead of all from one")
	sport := fs.Int("sport", 0, "source port (0: any); the same port continues an earlier flow")
	size := fs.Int("size", 0, "pad each datagram with '.' to this many bytes (above the MTU: sent as IP fragments)")
	_ = fs.Parse(args)
	if fs.NArg() != 2 {
		return fmt.Errorf("udp: want ADDR MSG")
	}
	msg := fs.Arg(1)
	if pad := *size - len(msg); pad > 0 {
		msg += strings.Repeat(".", pad)
	}
	var c net.Conn
	answered := 0
	for i := 0; i < *n; i++ {
		if i > 0 {
			time.Sleep(*interval)
		}
		if c == nil || *each {
			if c != nil {
				c.Close()
			}
			var err error
			d := net.Dialer{LocalAddr: &net.UDPAddr{Port: *sport}}
			if c, err = d.Dial("udp", fs.Arg(0)); err != nil {
				return err
			}
		}
		if answer, err := udpExchange(c, msg, *wait); err != nil {
			fmt.Println("timeout")
		} else {
			answered++
			if *size > 0 { // "HOST MSG....": the host and how much came back
				answer = fmt.Sprintf("%s (%d bytes)", strings.Fields(answer + " ?")[0], len(answer))
			}
			fmt.Println(answer)
		}
	}
	c.Close()
	if answered == 0 {
		return fmt.Errorf("no answer from %s", fs.Arg(0))
	}
	return nil
}

func udpExchange(c net.Conn, msg string, wait time.Duration) (string, error) {
	if _, err := c.Write([]byte(msg)); err != nil {
		return "", err
	}
	_ = c.SetReadDeadline(time.Now().Add(wait))
	buf := make([]byte, 65536)
	k, err := c.Read(buf)
	return string(buf[:k]), err
}

func touch(args []string) error {
	if len(args) != 1 {
		return fmt.Errorf("touch: want PATH")
	}
	return os.WriteFile(args[0], nil, 0o644)
}

// probe connects to every address in parallel, so a probe matrix costs one exec per pod.
func probe(args []string) error {
	fs := flag.NewFlagSet("probe", flag.ExitOnError)
	timeout := fs.Duration("t", time.Second, "connect timeout")
	_ = fs.Parse(args)
	results := make([]string, fs.NArg())
	done := make(chan struct{})
	for i, addr := range fs.Args() {
		go func() {
			c, err := net.DialTimeout("tcp", addr, *timeout)
			results[i] = addr + " fail"
			if err == nil {
				c.Close()
				results[i] = addr + " ok"
			}
			done <- struct{}{}
		}()
	}
	for range fs.Args() {
		<-done
	}
	for _, r := range results {
		fmt.Println(r)
	}
	return nil
}
