package netnstest

import (
	"bytes"
	"encoding/binary"
	"errors"
	"net"
	"net/netip"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// Capture opens a packet socket receiving every frame on the interface ifIndex (0: every
// interface) in the calling thread's netns, with a short receive timeout.
func Capture(ifIndex int) (int, error) {
	proto := htons(unix.ETH_P_ALL)
	fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, int(proto))
	if err != nil {
		return -1, err
	}
	err = unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: proto, Ifindex: ifIndex})
	if err == nil {
		tv := unix.NsecToTimeval((50 * time.Millisecond).Nanoseconds())
		err = unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv)
	}
	if err != nil {
		unix.Close(fd)
		return -1, err
	}
	return fd, nil
}

func readFrame(fd int) ([]byte, error) {
	buf := make([]byte, 2048)
	n, _, err := unix.Recvfrom(fd, buf, 0)
	if err != nil {
		return nil, err
	}
	if n < 14 {
		return nil, errors.New("runt frame")
	}
	return buf[:n], nil
}

// CollectAnnouncements reads frames from fd for up to wait (less once it has want of each)
// and returns when it saw the gratuitous ARPs for v4 and the advertisements for v6 from mac.
// The frames are checked field by field against the RFCs, not against kovn's own encoder.
func CollectAnnouncements(t *testing.T, fd int, v4, v6 netip.Addr, mac net.HardwareAddr, wait time.Duration, want int) (arps, nas []time.Time) {
	t.Helper()
	deadline := time.Now().Add(wait)
	for (len(arps) < want || len(nas) < want) && time.Now().Before(deadline) {
		frame, err := readFrame(fd)
		if err != nil || !bytes.Equal(frame[6:12], mac) {
			continue // timeout, or someone else's traffic
		}
		switch {
		case isGratuitousARP(frame, v4, mac):
			arps = append(arps, time.Now())
		case isNA(t, frame, v6, mac):
			nas = append(nas, time.Now())
		}
	}
	return arps, nas
}

// isGratuitousARP reports whether frame is a broadcast ARP request for ip from ip at mac
// with a zero target MAC (RFC 5227 "ARP announcement").
func isGratuitousARP(frame []byte, ip netip.Addr, mac net.HardwareAddr) bool {
	if len(frame) != 14+28 || !ip.Is4() || binary.BigEndian.Uint16(frame[12:14]) != unix.ETH_P_ARP {
		return false
	}
	a, v4 := frame[14:], ip.As4()
	return bytes.Equal(frame[0:6], []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}) &&
		binary.BigEndian.Uint16(a[0:2]) == 1 && binary.BigEndian.Uint16(a[2:4]) == unix.ETH_P_IP &&
		a[4] == 6 && a[5] == 4 && binary.BigEndian.Uint16(a[6:8]) == 1 &&
		bytes.Equal(a[8:14], mac) && bytes.Equal(a[14:18], v4[:]) &&
		bytes.Equal(a[18:24], make([]byte, 6)) && bytes.Equal(a[24:28], v4[:])
}

// isNA reports whether frame is the unsolicited advertisement of target at mac (Override
// set, target link-layer address option), and checks its IPv6 header: from target, to
// ff02::1, hop limit 255.
func isNA(t *testing.T, frame []byte, target netip.Addr, mac net.HardwareAddr) bool {
	t.Helper()
	if len(frame) < 14+40+4 || binary.BigEndian.Uint16(frame[12:14]) != unix.ETH_P_IPV6 {
		return false
	}
	ip6, icmp := frame[14:54], frame[54:]
	if ip6[6] != 58 || icmp[0] != 136 {
		return false
	}
	tgt := target.As16()
	want := append(append([]byte{0x20, 0, 0, 0}, tgt[:]...), append([]byte{2, 1}, mac...)...)
	if !bytes.Equal(icmp[4:], want) {
		t.Errorf("NA body %x, want %x", icmp[4:], want)
	}
	src, dst := netip.AddrFrom16([16]byte(ip6[8:24])), netip.AddrFrom16([16]byte(ip6[24:40]))
	if src != target || dst != netip.MustParseAddr("ff02::1") || ip6[7] != 255 {
		t.Errorf("NA from %s to %s with hop limit %d, want from %s to ff02::1 with 255", src, dst, ip6[7], target)
	}
	if !bytes.Equal(frame[0:6], []byte{0x33, 0x33, 0, 0, 0, 1}) {
		t.Errorf("NA sent to MAC %s, want 33:33:00:00:00:01", net.HardwareAddr(frame[0:6]))
	}
	return true
}

// htons converts to network byte order for sockaddr fields the kernel takes as is.
func htons(v uint16) uint16 {
	var b [2]byte
	binary.BigEndian.PutUint16(b[:], v)
	return binary.NativeEndian.Uint16(b[:])
}
