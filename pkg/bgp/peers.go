package bgp

import (
	"fmt"
	"hash/fnv"
	"net/netip"
	"sort"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	kovnv1 "github.com/kovn/kovn/api/v1alpha1"
)

// PeerPlan is what a node's speaker should hold: its identity, its sessions, and for each
// BgpPeer that selects the node but cannot be used, why (reported in that BgpPeer's status).
type PeerPlan struct {
	Global Global
	Peers  []Peer
	Errors map[string]string // BgpPeer name -> why it has no session here
	// Selected are the BgpPeers that select this node (with or without a session).
	Selected []string
}

// PeersFor is the pure computation of node's sessions from the BgpPeers and the Secrets of
// kovn's namespace (by name). Peers are taken in name order; a later one naming the same
// neighbour address as an earlier one is refused, not merged.
func PeersFor(node *corev1.Node, peers []kovnv1.BgpPeer, secrets map[string]*corev1.Secret) PeerPlan {
	plan := PeerPlan{Errors: map[string]string{}, Global: Global{ListenPort: -1}}
	sorted := append([]kovnv1.BgpPeer(nil), peers...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Name < sorted[j].Name })
	byAddr := map[netip.Addr]string{}
	for i := range sorted {
		bp := &sorted[i]
		if ok, err := selects(bp.Spec.NodeSelector, node); err != nil {
			plan.Selected = append(plan.Selected, bp.Name)
			plan.Errors[bp.Name] = err.Error()
			continue
		} else if !ok {
			continue
		}
		plan.Selected = append(plan.Selected, bp.Name)
		p, err := peerOf(bp, secrets)
		if err != nil {
			plan.Errors[bp.Name] = err.Error()
			continue
		}
		if other, dup := byAddr[p.Address]; dup {
			plan.Errors[bp.Name] = fmt.Sprintf("BgpPeer %s already peers with %s from this node", other, p.Address)
			continue
		}
		byAddr[p.Address] = bp.Name
		if len(plan.Peers) == 0 {
			plan.Global.ASN = p.LocalASN
			plan.Global.RouterID = routerID(bp.Spec.RouterID, node)
		}
		if p.Passive {
			plan.Global.ListenPort = 179
		}
		plan.Peers = append(plan.Peers, p)
	}
	return plan
}

func selects(sel *metav1.LabelSelector, node *corev1.Node) (bool, error) {
	if sel == nil {
		return true, nil
	}
	s, err := metav1.LabelSelectorAsSelector(sel)
	if err != nil {
		return false, fmt.Errorf("nodeSelector: %w", err)
	}
	return s.Matches(labels.Set(node.Labels)), nil
}

// defaultMaxPrefixes is the CRD's default for spec.maxPrefixes, here too because GoBGP reads
// 0 as "no limit": an object that somehow lacks the field still gets a bound.
const defaultMaxPrefixes = 10000

func peerOf(bp *kovnv1.BgpPeer, secrets map[string]*corev1.Secret) (Peer, error) {
	s := bp.Spec
	addr, err := netip.ParseAddr(s.PeerAddress)
	if err != nil {
		return Peer{}, fmt.Errorf("peerAddress %q: %w", s.PeerAddress, err)
	}
	p := Peer{Name: bp.Name, Address: addr.Unmap(), Port: 179, PeerASN: uint32(s.PeerASN), LocalASN: uint32(s.LocalASN),
		HoldTime: uint64(s.HoldTimeSeconds), Keepalive: uint64(s.KeepaliveSeconds), MultihopTTL: uint32(s.EBGPMultihopTTL),
		Passive: s.Passive, MaxPrefixes: defaultMaxPrefixes}
	if s.MaxPrefixes > 0 {
		p.MaxPrefixes = uint32(s.MaxPrefixes)
	}
	if s.Port > 0 {
		p.Port = uint16(s.Port)
	}
	if p.Keepalive == 0 && p.HoldTime > 0 {
		p.Keepalive = max(1, p.HoldTime/3)
	}
	if gr := s.GracefulRestart; gr != nil && gr.Enabled {
		p.GracefulRestart, p.RestartTime = true, uint32(gr.RestartTimeSeconds)
		if p.RestartTime == 0 {
			p.RestartTime = 120
		}
	}
	if ref := s.PasswordSecretRef; ref != nil {
		key := ref.Key
		if key == "" {
			key = "password"
		}
		sec, ok := secrets[ref.Name]
		if !ok {
			return Peer{}, fmt.Errorf("password Secret %q not found in namespace %s", ref.Name, SecretsNamespace)
		}
		pw, ok := sec.Data[key]
		if !ok || len(pw) == 0 {
			return Peer{}, fmt.Errorf("password Secret %q has no key %q", ref.Name, key)
		}
		if len(pw) > 80 { // TCP_MD5SIG_MAXKEYLEN
			return Peer{}, fmt.Errorf("password in Secret %q is %d bytes, TCP MD5 allows 80", ref.Name, len(pw))
		}
		p.Password = string(pw)
	}
	return p, nil
}

// routerID is the BgpPeer's explicit one, else the node's IPv4 InternalIP, else a stable
// number from the node's name (an IPv6-only node has no IPv4 address to borrow).
func routerID(explicit string, node *corev1.Node) netip.Addr {
	if a, err := netip.ParseAddr(explicit); err == nil && a.Is4() {
		return a
	}
	for _, na := range node.Status.Addresses {
		if na.Type != corev1.NodeInternalIP {
			continue
		}
		if a, err := netip.ParseAddr(na.Address); err == nil && a.Unmap().Is4() {
			return a.Unmap()
		}
	}
	h := fnv.New32a()
	h.Write([]byte(node.Name))
	v := h.Sum32() | 1<<24 // never 0.x.x.x
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)})
}
