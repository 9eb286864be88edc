package hostnet

import (
	"fmt"
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

// TX checksum offload must be off on kernel interfaces whose traffic enters the userspace
// OVS datapath: the kernel hands a veth packet over with a partial checksum that nobody
// completes, so ICMP works while TCP is dropped by the receiver. `ethtool -K IF tx off`
// does it with the legacy ETHTOOL_STXCSUM command; so do we, without the binary.

// Legacy ethtool commands (linux/ethtool.h).
const (
	ethtoolGTXCSUM = 0x16 // get TX hw csum enable (ethtool_value)
	ethtoolSTXCSUM = 0x17 // set TX hw csum enable (ethtool_value)
)

// ethtoolValue is struct ethtool_value.
type ethtoolValue struct {
	cmd  uint32
	data uint32
}

// ifreqData is struct ifreq with ifr_data: the name and a pointer, padded to the size of
// the ifreq union (IFNAMSIZ + 24 bytes on 64-bit).
type ifreqData struct {
	name [unix.IFNAMSIZ]byte
	data unsafe.Pointer
	_    [24 - unsafe.Sizeof(uintptr(0))]byte
}

// SetTxChecksum turns TX checksum offload of ifName on or off (`ethtool -K IF tx off`),
// for the interface of that name in the calling thread's network namespace.
func SetTxChecksum(ifName string, on bool) error {
	v := &ethtoolValue{cmd: ethtoolSTXCSUM}
	if on {
		v.data = 1
	}
	if err := ethtoolIoctl(ifName, v); err != nil {
		return fmt.Errorf("setting TX checksum offload of %s to %t: %w", ifName, on, err)
	}
	return nil
}

// TxChecksum reports whether TX checksum offload is on for ifName (calling thread's
// network namespace).
func TxChecksum(ifName string) (bool, error) {
	v := &ethtoolValue{cmd: ethtoolGTXCSUM}
	if err := ethtoolIoctl(ifName, v); err != nil {
		return false, fmt.Errorf("reading TX checksum offload of %s: %w", ifName, err)
	}
	return v.data != 0, nil
}

// ethtoolIoctl issues SIOCETHTOOL for ifName with v as ifr_data.
func ethtoolIoctl(ifName string, v *ethtoolValue) error {
	if len(ifName) == 0 || len(ifName) >= unix.IFNAMSIZ {
		return fmt.Errorf("invalid interface name %q", ifName)
	}
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("opening ethtool socket: %w", err)
	}
	defer unix.Close(fd)
	req := &ifreqData{data: unsafe.Pointer(v)}
	copy(req.name[:], ifName)
	_, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.SIOCETHTOOL, uintptr(unsafe.Pointer(req)))
	runtime.KeepAlive(req)
	runtime.KeepAlive(v)
	if errno != 0 {
		return errno
	}
	return nil
}
