package interconnect

import (
	"fmt"
	"net/netip"

	kovnv1 "github.com/kovn/kovn/api/v1alpha1"
	"github.com/kovn/kovn/pkg/cluster"
)

// parsedSpec is the part of an InterConnect spec that needs parsing beyond the CRD's schema.
type parsedSpec struct {
	advertise, refuse []netip.Prefix
	bfd               BFD
}

// parseSpec checks what CEL cannot and fills defaults; an error names the bad field.
func parseSpec(s *kovnv1.InterConnectSpec) (parsedSpec, error) {
	var out parsedSpec
	var err error
	if out.advertise, err = parseCIDRs("advertiseCIDRs", s.AdvertiseCIDRs); err != nil {
		return out, err
	}
	if out.refuse, err = parseCIDRs("refuseCIDRs", s.RefuseCIDRs); err != nil {
		return out, err
	}
	out.bfd = BFD{MinRx: cluster.GatewayBFDIntervalMillis, MinTx: cluster.GatewayBFDIntervalMillis, Mult: cluster.GatewayBFDMult}
	if b := s.BFD; b != nil {
		if b.MinRxMillis > 0 {
			out.bfd.MinRx = int(b.MinRxMillis)
		}
		if b.MinTxMillis > 0 {
			out.bfd.MinTx = int(b.MinTxMillis)
		}
		if b.Multiplier > 0 {
			out.bfd.Mult = int(b.Multiplier)
		}
	}
	return out, nil
}

func parseCIDRs(field string, in []string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, s := range in {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return nil, fmt.Errorf("%s: %q is not a CIDR", field, s)
		}
		if p.Masked() != p {
			return nil, fmt.Errorf("%s: %q has host bits set (did you mean %s?)", field, s, p.Masked())
		}
		out = append(out, p)
	}
	return out, nil
}
