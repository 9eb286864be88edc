package main

import (
	"encoding/binary"
	"encoding/hex"
	"flag"
	"fmt"
	"math/bits"
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"time"

	"golang.org/x/net/icmp"
	"golang.org/x/net/ipv6"
)

// routerSolicit sends one router solicitation to all-routers on the interface and prints the
// first router advertisement that answers it: who sent it, its flags, prefixes and MTU.
func routerSolicit(args []string) error {
	fs := flag.NewFlagSet("rs", flag.ExitOnError)
	ifname := fs.String("i", "eth0", "interface to solicit on")
	wait := fs.Duration("W", 3*time.Second, "time to wait for the advertisement")
	_ = fs.Parse(args)
	conn, err := icmp.ListenPacket("ip6:ipv6-icmp", "::")
	if err != nil {
		return err
	}
	defer conn.Close()
	pc := conn.IPv6PacketConn()
	// Neighbour discovery messages must carry hop limit 255 (RFC 4861 6.1.1): receivers drop
	// anything else, as proof the sender is on-link.
	if err := pc.SetMulticastHopLimit(255); err != nil {
		return err
	}
	rs := icmp.Message{Type: ipv6.ICMPTypeRouterSolicitation, Body: &icmp.RawBody{Data: make([]byte, 4)}}
	b, _ := rs.Marshal(nil)
	if _, err := conn.WriteTo(b, &net.IPAddr{IP: net.ParseIP("ff02::2"), Zone: *ifname}); err != nil {
		return fmt.Errorf("send router solicitation on %s: %w", *ifname, err)
	}
	_ = conn.SetReadDeadline(time.Now().Add(*wait))
	buf := make([]byte, 1500)
	for {
		n, peer, err := conn.ReadFrom(buf)
		if err != nil {
			return fmt.Errorf("no router advertisement on %s: %w", *ifname, err)
		}
		m, err := icmp.ParseMessage(58, buf[:n])
		if err != nil || m.Type != ipv6.ICMPTypeRouterAdvertisement {
			continue
		}
		raw, ok := m.Body.(*icmp.RawBody)
		if !ok {
			continue
		}
		fmt.Printf("router advertisement from %s: %s\n", peer, describeRA(raw.Data))
		return nil
	}
}

// describeRA renders an RA body (RFC 4861 4.2: hop limit, flags, lifetime, timers, options).
func describeRA(b []byte) string {
	if len(b) < 12 {
		return "truncated"
	}
	out := []string{fmt.Sprintf("managed=%t other=%t lifetime=%ds", b[1]&0x80 != 0, b[1]&0x40 != 0, binary.BigEndian.Uint16(b[2:4]))}
	for opts := b[12:]; len(opts) >= 8 && opts[1] > 0 && len(opts) >= int(opts[1])*8; opts = opts[int(opts[1])*8:] {
		o := opts[:int(opts[1])*8]
		switch o[0] {
		case 1: // source link-layer address
			out = append(out, "source-mac="+net.HardwareAddr(o[2:8]).String())
		case 3: // prefix information
			if len(o) == 32 {
				p := netip.PrefixFrom(netip.AddrFrom16([16]byte(o[16:32])), int(o[2]))
				out = append(out, fmt.Sprintf("prefix=%s on-link=%t autonomous=%t", p, o[3]&0x80 != 0, o[3]&0x40 != 0))
			}
		case 5: // MTU
			out = append(out, fmt.Sprintf("mtu=%d", binary.BigEndian.Uint32(o[4:8])))
		}
	}
	return strings.Join(out, " ")
}

// printRoutes prints the main table of both families from /proc, one "DST via GW dev IF" per
// line (the image has no iproute2).
func printRoutes() error {
	if b, err := os.ReadFile("/proc/net/route"); err == nil {
		for _, l := range strings.Split(string(b), "\n")[1:] {
			f := strings.Fields(l)
			if len(f) < 8 {
				continue
			}
			mask, _ := strconv.ParseUint(f[7], 16, 32)
			bits := bits.OnesCount32(uint32(mask))
			fmt.Printf("route %s via %s dev %s\n", netip.PrefixFrom(le32(f[1]), bits), le32(f[2]), f[0])
		}
	}
	b, err := os.ReadFile("/proc/net/ipv6_route")
	if err != nil {
		return nil // IPv6 disabled in this pod
	}
	for _, l := range strings.Split(string(b), "\n") {
		f := strings.Fields(l) // dst plen src splen gw metric refcnt use flags dev
		if len(f) != 10 || f[9] == "lo" {
			continue
		}
		plen, _ := strconv.ParseUint(f[1], 16, 8)
		fmt.Printf("route %s via %s dev %s\n", netip.PrefixFrom(hex16(f[0]), int(plen)), hex16(f[4]), f[9])
	}
	return nil
}

func le32(s string) netip.Addr {
	v, _ := strconv.ParseUint(s, 16, 32)
	var a [4]byte
	binary.LittleEndian.PutUint32(a[:], uint32(v))
	return netip.AddrFrom4(a)
}

func hex16(s string) netip.Addr {
	var a [16]byte
	_, _ = hex.Decode(a[:], []byte(s))
	return netip.AddrFrom16(a)
}
