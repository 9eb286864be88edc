package hostnet

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"time"

	"github.com/go-logr/logr"
	"github.com/vishvananda/netns"
	"golang.org/x/net/icmp"
	"golang.org/x/net/ipv6"
	"golang.org/x/sys/unix"
)

// A new pod may get an address an earlier pod had, with another MAC (IPv6-only pods get
// random MACs; static IPs may come with their own). Neighbours that talked to the old pod
// still map the address to the old MAC, which no port has any more, so OVN drops their
// packets until the kernel's unreachability detection gives up, 5-8 s later. Announcing
// the pod's addresses once its port forwards makes them re-learn at once: a gratuitous ARP
// for IPv4, an unsolicited Neighbor Advertisement with the Override flag for IPv6 (RFC 4861
// 7.2.6). Linux updates an existing entry from either (it creates none, so this does not
// fill caches of nodes that never talked to the address).

const (
	// announceCount is how many times each address is announced. One frame can be lost
	// (a queue overflows, a remote chassis is still installing flows); a few, spaced
	// apart, make that unlikely. RFC 4861 7.2.6 allows up to 3 (MAX_NEIGHBOR_ADVERTISEMENT).
	announceCount = 3
	// announceInterval spaces the repeats: back-to-back copies would share the fate of the
	// first one, and RFC 4861 7.2.6 says they MUST be at least RetransTimer (1 s by
	// default) apart. Only a lost first copy makes a neighbour wait for the second, and 1 s
	// is still well under the 5-8 s it would wait otherwise.
	announceInterval = time.Second
)

// announcement is one address's announcement on an open socket.
type announcement struct {
	addr  netip.Addr
	send  func() error
	close func() error
}

// AnnounceIn announces ips with mac on ifName inside ns. The sockets are opened inside
// ns and keep sending there after the thread has left it (a socket belongs to the netns
// it was created in), so only opening them needs inNetNS. The first round is sent before
// returning, which is all an ADD waits for (a few hundred microseconds); the repeats go
// from a goroutine that owns the sockets and closes them when done, so ADD does not wait
// for the repeats. Later failures (the pod deleted meanwhile) go to log only.
// The returned error covers opening and the first round; announcing is an optimisation,
// so the caller only logs it.
func AnnounceIn(log logr.Logger, ns netns.NsHandle, ifName string, mac net.HardwareAddr, ips []netip.Prefix) error {
	var annErr error
	if err := InNetNS(ns, func() error {
		annErr = AnnounceHere(log, ifName, mac, ips) // the sockets stay in ns after the thread leaves it
		return nil
	}); err != nil {
		return err
	}
	return annErr
}

// AnnounceHere announces ips with mac on ifName in the calling thread's netns, as
// AnnounceIn does for a pod: the first round before returning, the repeats from a
// goroutine. kovn-daemon uses it when a node's addresses move to another interface.
func AnnounceHere(log logr.Logger, ifName string, mac net.HardwareAddr, ips []netip.Prefix) error {
	anns, openErr := openAnnouncements(ifName, mac, ips)
	if len(anns) == 0 {
		return openErr
	}
	firstErr := sendAnnouncements(anns)
	go func() {
		defer closeAnnouncements(anns)
		for i := 1; i < announceCount; i++ {
			time.Sleep(announceInterval)
			if err := sendAnnouncements(anns); err != nil {
				log.V(1).Info("repeating the address announcement failed", "iface", ifName, "error", err.Error())
				return
			}
		}
	}()
	return errors.Join(openErr, firstErr)
}

// openAnnouncements opens a socket per address family present in ips, in the calling
// thread's netns. It returns what it could open together with the errors of the rest.
func openAnnouncements(ifName string, mac net.HardwareAddr, ips []netip.Prefix) ([]announcement, error) {
	iface, err := net.InterfaceByName(ifName)
	if err != nil {
		return nil, fmt.Errorf("announcing addresses: finding %s: %w", ifName, err)
	}
	var anns []announcement
	var errs []error
	var arpFD = -1
	for _, p := range ips {
		addr := p.Addr()
		var a announcement
		var err error
		if addr.Is4() {
			if arpFD < 0 {
				if arpFD, err = openARPSocket(); err != nil {
					errs = append(errs, err)
					continue
				}
				a.close = func() error { return unix.Close(arpFD) } // once, on the first IPv4 address
			}
			a.addr, a.send = addr, arpSender(arpFD, iface.Index, gratuitousARP(addr, mac))
		} else {
			a, err = openNASender(iface, addr, mac)
			if err != nil {
				errs = append(errs, err)
				continue
			}
		}
		anns = append(anns, a)
	}
	return anns, errors.Join(errs...)
}

// sendAnnouncements sends each announcement once; one failing does not stop the others.
func sendAnnouncements(anns []announcement) error {
	var errs []error
	for _, a := range anns {
		if err := a.send(); err != nil {
			errs = append(errs, fmt.Errorf("announcing %s: %w", a.addr, err))
		}
	}
	return errors.Join(errs...)
}

func closeAnnouncements(anns []announcement) {
	for _, a := range anns {
		if a.close != nil {
			_ = a.close()
		}
	}
}

// openARPSocket opens an AF_PACKET socket for sending whole Ethernet frames. Protocol 0
// means it receives nothing, so nothing queues up on it while it is open.
func openARPSocket() (int, error) {
	fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("opening a packet socket for gratuitous ARP: %w", err)
	}
	return fd, nil
}

// arpSender sends frame out of the interface with index ifIndex on the packet socket fd.
func arpSender(fd, ifIndex int, frame []byte) func() error {
	to := &unix.SockaddrLinklayer{
		Protocol: htons(unix.ETH_P_ARP),
		Ifindex:  ifIndex,
		Halen:    6,
		Addr:     [8]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff},
	}
	return func() error { return unix.Sendto(fd, frame, 0, to) }
}

// openNASender opens an ICMPv6 socket bound to addr (usable at once: kovn adds pod
// addresses without DAD) so the advertisement comes from the address it announces, as
// RFC 4861 7.2.6 wants, rather than from a link-local address that may still be tentative.
func openNASender(iface *net.Interface, addr netip.Addr, mac net.HardwareAddr) (announcement, error) {
	conn, err := icmp.ListenPacket("ip6:ipv6-icmp", addr.String())
	if err != nil {
		return announcement{}, fmt.Errorf("opening an ICMPv6 socket on %s: %w", addr, err)
	}
	pc := conn.IPv6PacketConn()
	// Receivers drop neighbour discovery with any other hop limit (RFC 4861 7.1.2), proof
	// that it was not forwarded.
	err = pc.SetMulticastHopLimit(255)
	if err == nil {
		// The interface is chosen by index here, inside the pod's netns. A zone on the
		// destination would not do: Go resolves zone names when sending, in whatever netns
		// the sending thread is then (the node's), where eth0 is another interface.
		err = pc.SetMulticastInterface(iface)
	}
	if err == nil {
		err = pc.SetMulticastLoopback(false) // our own stack has nothing to learn from it
	}
	if err == nil {
		var f ipv6.ICMPFilter
		f.SetAll(true) // nothing is read from this socket: let nothing queue up on it
		err = pc.SetICMPFilter(&f)
	}
	if err != nil {
		conn.Close()
		return announcement{}, fmt.Errorf("setting up the ICMPv6 socket on %s: %w", addr, err)
	}
	msg := neighborAdvert(addr, mac)
	to := &net.IPAddr{IP: net.IPv6linklocalallnodes}
	send := func() error {
		_, err := conn.WriteTo(msg, to)
		return err
	}
	return announcement{addr: addr, send: send, close: conn.Close}, nil
}

// neighborAdvert is the ICMPv6 message (RFC 4861 4.4) announcing that target is at mac:
// unsolicited (Solicited clear, else receivers would take the address as confirmed
// reachable), Override set (else they keep the MAC they have), Router clear (a pod is no
// router), with the target link-layer address option. The checksum stays zero: the kernel
// fills it in on ICMPv6 raw sockets, as it knows the source address.
func neighborAdvert(target netip.Addr, mac net.HardwareAddr) []byte {
	body := make([]byte, 4+16+8)
	body[0] = 0x20 // R=0x80 S=0x40 O=0x20
	t := target.As16()
	copy(body[4:20], t[:])
	body[20], body[21] = 2, 1 // option: target link-layer address, length 1 (8 bytes)
	copy(body[22:28], mac)
	m := icmp.Message{Type: ipv6.ICMPTypeNeighborAdvertisement, Body: &icmp.RawBody{Data: body}}
	b, _ := m.Marshal(nil) // cannot fail for a raw body
	return b
}

// gratuitousARP is the Ethernet frame of an ARP request for ip from ip at mac, broadcast:
// sender and target IP are the same and the target MAC zero, as hosts send one for their
// own address when it comes up (RFC 5227 "ARP announcement"). A request rather than a
// reply, since some stacks only learn from requests; Linux updates an existing entry
// from either.
func gratuitousARP(ip netip.Addr, mac net.HardwareAddr) []byte {
	f := make([]byte, 14+28)
	copy(f[0:6], []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff})
	copy(f[6:12], mac)
	binary.BigEndian.PutUint16(f[12:14], unix.ETH_P_ARP)
	a := f[14:]
	binary.BigEndian.PutUint16(a[0:2], 1)             // hardware type: Ethernet
	binary.BigEndian.PutUint16(a[2:4], unix.ETH_P_IP) // protocol type: IPv4
	a[4], a[5] = 6, 4                                 // address lengths
	binary.BigEndian.PutUint16(a[6:8], 1)             // operation: request
	v4 := ip.As4()
	copy(a[8:14], mac)
	copy(a[14:18], v4[:])
	// a[18:24], the target MAC, stays zero.
	copy(a[24:28], v4[:])
	return f
}

// htons converts to network byte order for sockaddr fields the kernel takes as is.
func htons(v uint16) uint16 {
	var b [2]byte
	binary.BigEndian.PutUint16(b[:], v)
	return binary.NativeEndian.Uint16(b[:])
}
