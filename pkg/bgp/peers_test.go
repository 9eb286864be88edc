package bgp

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kovnv1 "github.com/kovn/kovn/api/v1alpha1"
)

func bgpPeer(name, addr string, localASN int64, sel map[string]string) kovnv1.BgpPeer {
	p := kovnv1.BgpPeer{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: kovnv1.BgpPeerSpec{PeerAddress: addr, PeerASN: 64500, LocalASN: localASN, HoldTimeSeconds: 9}}
	if sel != nil {
		p.Spec.NodeSelector = &metav1.LabelSelector{MatchLabels: sel}
	}
	return p
}

func TestPeersForSelectsPerNodeASNsAndReportsBadPeers(t *testing.T) {
	rack1 := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", Labels: map[string]string{"rack": "1"}},
		Status: corev1.NodeStatus{Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "fd00::11"}, {Type: corev1.NodeInternalIP, Address: "172.30.1.11"}}}}
	rack2 := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n2", Labels: map[string]string{"rack": "2"}}}
	md5 := bgpPeer("c-md5", "172.30.0.253", 64512, nil)
	md5.Spec.PasswordSecretRef = &kovnv1.SecretKeyRef{Name: "tor-md5"}
	md5.Spec.MaxPrefixes = 50
	missing := bgpPeer("d-missing", "172.30.0.252", 64512, nil)
	missing.Spec.PasswordSecretRef = &kovnv1.SecretKeyRef{Name: "nope"}
	gr := bgpPeer("e-gr", "fd00:30::254", 64512, nil)
	gr.Spec.GracefulRestart = &kovnv1.GracefulRestart{Enabled: true}
	peers := []kovnv1.BgpPeer{
		gr, missing, md5,
		bgpPeer("a-rack1", "172.30.0.254", 65001, map[string]string{"rack": "1"}),
		bgpPeer("b-rack2", "172.30.0.254", 65002, map[string]string{"rack": "2"}),
		bgpPeer("f-dup", "172.30.0.254", 65009, nil),
	}
	secrets := map[string]*corev1.Secret{"tor-md5": {Data: map[string][]byte{"password": []byte("s3cret")}}}

	p1 := PeersFor(rack1, peers, secrets)
	if p1.Global.ASN != 65001 || p1.Global.RouterID.String() != "172.30.1.11" || p1.Global.ListenPort != -1 {
		t.Errorf("n1 global %+v, want AS 65001 (its rack's), router id 172.30.1.11, no listener", p1.Global)
	}
	var names []string
	for _, p := range p1.Peers {
		names = append(names, p.Name)
	}
	if strings.Join(names, ",") != "a-rack1,c-md5,e-gr" {
		t.Errorf("n1 peers %v, want a-rack1,c-md5,e-gr", names)
	}
	if p1.Peers[1].Password != "s3cret" || p1.Peers[0].Keepalive != 3 || !p1.Peers[2].GracefulRestart || p1.Peers[2].RestartTime != 120 ||
		p1.Peers[1].MaxPrefixes != 50 || p1.Peers[0].MaxPrefixes != defaultMaxPrefixes {
		t.Errorf("n1 peer details wrong: %+v", p1.Peers)
	}
	if !strings.Contains(p1.Errors["d-missing"], `Secret "nope" not found`) || !strings.Contains(p1.Errors["f-dup"], "a-rack1 already peers") {
		t.Errorf("n1 errors %v", p1.Errors)
	}
	if _, ok := p1.Errors["b-rack2"]; ok {
		t.Errorf("b-rack2 does not select n1 but has an error there")
	}
	p2 := PeersFor(rack2, peers, secrets)
	if p2.Global.ASN != 65002 || p2.Peers[0].Name != "b-rack2" || !p2.Global.RouterID.Is4() || p2.Global.RouterID.As4()[0] == 0 {
		t.Errorf("n2: %+v, want its own AS 65002 with b-rack2 first and a derived router id", p2)
	}
}
