package ipam

import (
	"crypto/rand"
	"fmt"
	"net"
)

// derivedPrefix is the locally administered unicast OUI that ovn-kubernetes also uses: the MAC
// of a pod with IPv4 address a.b.c.d is 0a:58:a:b:c:d, so a MAC seen in a capture names its pod.
var derivedPrefix = [2]byte{0x0a, 0x58}

// canonicalMAC accepts a 48-bit unicast MAC in any form net.ParseMAC reads (upper case, dashes)
// and returns the lower-case colon form OVN and the IP CRD use, so that a hand-written
// annotation works and compares equal on retries.
func canonicalMAC(s string) (string, error) {
	hw, err := net.ParseMAC(s)
	switch {
	case err != nil || len(hw) != 6:
		return "", errorf(ErrInvalid, "%q is not a 48-bit MAC address", s)
	case hw[0]&0x01 != 0:
		return "", errorf(ErrInvalid, "%s is a multicast MAC address", s)
	case hw.String() == "00:00:00:00:00:00":
		return "", errorf(ErrInvalid, "the all-zero MAC address is not usable")
	}
	return hw.String(), nil
}

// generateMAC returns a MAC for a new allocation: derived from its IPv4 address when it has
// one, otherwise (or if a static MAC already took the derived one) random. MACs only need to be
// unique per subnet (one logical switch); overlapping CIDRs in different VPCs derive the same
// MACs harmlessly.
func (s *subnet) generateMAC(picks []pick) (string, error) {
	for _, pk := range picks {
		if pk.addr.Is4() {
			b := pk.addr.As4()
			mac := net.HardwareAddr{derivedPrefix[0], derivedPrefix[1], b[0], b[1], b[2], b[3]}.String()
			if _, held := s.macs[mac]; !held {
				return mac, nil
			}
		}
	}
	return s.randomMAC(rand.Read)
}

// randomMAC draws locally administered unicast MACs outside 0a:xx:... (so a future IPv4
// allocation does not find its derived MAC taken, and no pod gets a MAC of the range kovn gives
// router ports) until one is free. read is crypto/rand.Read
// outside tests.
func (s *subnet) randomMAC(read func([]byte) (int, error)) (string, error) {
	b := make(net.HardwareAddr, 6)
	for try := 0; try < 32; try++ {
		if _, err := read(b); err != nil {
			return "", fmt.Errorf("random MAC: %w", err)
		}
		b[0] = b[0]&^0x01 | 0x02      // clear multicast bit, set locally administered bit
		if b[0] == derivedPrefix[0] { // 0a:...: router ports' range, and the derived pod range
			continue
		}
		if _, held := s.macs[b.String()]; !held {
			return b.String(), nil
		}
	}
	return "", errorf(ErrExhausted, "no free random MAC found")
}
