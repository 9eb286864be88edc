package main

import (
	"context"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"net"
	"sort"
	"strings"
	"sync"
	"time"

	"golang.org/x/net/dns/dnsmessage"
)

// dnsLookup resolves a name the way a pod's programs do — Go's own resolver, reading
// /etc/resolv.conf for the nameserver, search path and ndots — but over the transport asked
// for (UDP, or TCP with -tcp). It prints every reply the server sent ("reply NAME TYPE RCODE
// answers=N": the search path shows as one reply per name tried), then the records found
// ("A 10.96.0.1", "AAAA …", "CNAME …", "SRV target port") and a summary line.
//
//	testbox dns [-tcp] [-W 5s] [-server ADDR:PORT] NAME [A|AAAA|CNAME|SRV]
func dnsLookup(args []string) error {
	fs := flag.NewFlagSet("dns", flag.ExitOnError)
	useTCP := fs.Bool("tcp", false, "query over TCP instead of UDP")
	wait := fs.Duration("W", 5*time.Second, "give up after this long")
	server := fs.String("server", "", "ask this ADDR:PORT instead of resolv.conf's nameserver (search path kept)")
	_ = fs.Parse(args)
	if fs.NArg() < 1 || fs.NArg() > 2 {
		return errors.New("usage: testbox dns [-tcp] [-W 5s] [-server ADDR:PORT] NAME [A|AAAA|CNAME|SRV]")
	}
	name, qtype := fs.Arg(0), "A"
	if fs.NArg() == 2 {
		qtype = strings.ToUpper(fs.Arg(1))
	}
	sn := &sniffer{}
	var mu sync.Mutex
	used := map[string]bool{}
	// The resolver asks for "udp" and falls back to "tcp" on a truncated answer; -tcp makes
	// every query TCP. It tells the two apart by whether the conn is a PacketConn.
	r := &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, network, address string) (net.Conn, error) {
		if *useTCP {
			network = "tcp"
		}
		if *server != "" {
			address = *server
		}
		mu.Lock()
		used[network+" "+address] = true
		mu.Unlock()
		var d net.Dialer
		c, err := d.DialContext(ctx, network, address)
		if err != nil {
			return nil, err
		}
		if uc, ok := c.(*net.UDPConn); ok {
			return &sniffPacketConn{UDPConn: uc, s: sn}, nil
		}
		return &sniffStreamConn{Conn: c, s: sn}, nil
	}}
	ctx, cancel := context.WithTimeout(context.Background(), *wait)
	defer cancel()
	start := time.Now()
	records, err := lookup(ctx, r, name, qtype)
	took := time.Since(start)
	for _, l := range sn.lines() {
		fmt.Println(l)
	}
	for _, l := range records {
		fmt.Println(l)
	}
	var via []string
	for k := range used {
		via = append(via, k)
	}
	sort.Strings(via)
	if len(via) == 0 {
		via = []string{"/etc/hosts"} // answered without asking a server
	}
	fmt.Printf("via %s: %d replies in %.2fms\n", strings.Join(via, ", "), len(sn.lines()), float64(took.Microseconds())/1000)
	var dnsErr *net.DNSError
	if errors.As(err, &dnsErr) && dnsErr.IsNotFound {
		fmt.Println("NOTFOUND", err)
	}
	return err
}

func lookup(ctx context.Context, r *net.Resolver, name, qtype string) ([]string, error) {
	var out []string
	switch qtype {
	case "A", "AAAA":
		nw := map[string]string{"A": "ip4", "AAAA": "ip6"}[qtype]
		ips, err := r.LookupNetIP(ctx, nw, name)
		if err != nil {
			return nil, err
		}
		for _, ip := range ips {
			out = append(out, qtype+" "+ip.Unmap().String())
		}
	case "CNAME":
		cname, err := r.LookupCNAME(ctx, name)
		if err != nil {
			return nil, err
		}
		out = append(out, "CNAME "+cname)
	case "SRV":
		_, srvs, err := r.LookupSRV(ctx, "", "", name)
		if err != nil {
			return nil, err
		}
		for _, s := range srvs {
			out = append(out, fmt.Sprintf("SRV %s %d", s.Target, s.Port))
		}
	default:
		return nil, fmt.Errorf("record type %q: want A, AAAA, CNAME or SRV", qtype)
	}
	sort.Strings(out)
	return out, nil
}

// sniffer records the header of every DNS reply read through its connections.
type sniffer struct {
	mu  sync.Mutex
	out []string
}

func (s *sniffer) record(msg []byte) {
	var p dnsmessage.Parser
	h, err := p.Start(msg)
	if err != nil {
		return
	}
	qs, err := p.AllQuestions()
	if err != nil || len(qs) == 0 {
		return
	}
	q := qs[0]
	answers, _ := p.AllAnswers()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.out = append(s.out, fmt.Sprintf("reply %s %s %s answers=%d", q.Name, strings.TrimPrefix(q.Type.String(), "Type"),
		strings.TrimPrefix(h.RCode.String(), "RCode"), len(answers)))
}

func (s *sniffer) lines() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.out...)
}

// sniffPacketConn hands each datagram the resolver reads to the sniffer.
type sniffPacketConn struct {
	*net.UDPConn
	s *sniffer
}

func (c *sniffPacketConn) Read(b []byte) (int, error) {
	n, err := c.UDPConn.Read(b)
	c.s.record(b[:n])
	return n, err
}

// sniffStreamConn hands the sniffer each message of a TCP stream, which carries them behind a
// two-byte length (RFC 1035 4.2.2).
type sniffStreamConn struct {
	net.Conn
	s   *sniffer
	buf []byte
}

func (c *sniffStreamConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	c.buf = append(c.buf, b[:n]...)
	for len(c.buf) >= 2 {
		l := int(binary.BigEndian.Uint16(c.buf))
		if len(c.buf) < 2+l {
			break
		}
		c.s.record(c.buf[2 : 2+l])
		c.buf = c.buf[2+l:]
	}
	return n, err
}
