package servicenat

import (
	"fmt"
	"net/netip"
	"testing"

	"github.com/kovn/kovn/pkg/hostnet/netnstest"
)

// BenchmarkNodePortSyncOnEndpointChange: one pass of a node's NodePort rules after each
// ETP=Local Service's local endpoint was replaced (a rollout), both families, in a throwaway
// netns: the time a terminating pod stays in the node's rules after its Service's endpoints
// changed. 15 Services, every third ETP=Local. (2026-11-29, 2 cores, iptables 1.8.9 nft:
// ~510 ms a pass when each differing rule was one iptables run, ~110 ms with each table's
// chains replaced in one iptables-restore run.)
//
//	go test -run '^$' -bench NodePortSync ./pkg/node/servicenat/
func BenchmarkNodePortSyncOnEndpointChange(b *testing.B) {
	services := func(gen int) []NodePortService {
		var out []NodePortService
		for i := 0; i < 15; i++ {
			s := NodePortService{Key: fmt.Sprintf("ns/s%d", i),
				ClusterIPs: addrList(fmt.Sprintf("10.96.1.%d", i), fmt.Sprintf("fd00:10:96::1:%x", i)),
				Ports:      []NodePortPort{{Name: "http", Protocol: "TCP", Port: 80, NodePort: int32(30100 + i)}}}
			if i%3 == 0 {
				s.LocalOnly = true
				s.LocalEndpoints = []LocalEndpoint{
					{Addr: netip.MustParseAddr(fmt.Sprintf("10.16.%d.%d", gen%250, i)), Ports: map[string]int32{"http": 8080}},
					{Addr: netip.MustParseAddr(fmt.Sprintf("fd00:10:16::%x:%x", gen, i)), Ports: map[string]int32{"http": 8080}}}
			}
			out = append(out, s)
		}
		return out
	}
	netnstest.Do(b, func() {
		for _, is4 := range []bool{true, false} {
			if err := SyncOwnPodsSet(is4, nil); err != nil { // the ETP=Local rules match it
				b.Fatal(err)
			}
		}
		var chains familyChains
		sync := func(gen int) {
			svcs := services(gen)
			if err := chains.sync(func(is4 bool) string { return NodePortRules(is4, svcs, NodeSide{}) }, ApplyNodePortRules); err != nil {
				b.Fatal(err)
			}
		}
		sync(0)
		b.ResetTimer()
		for i := 1; i <= b.N; i++ {
			sync(i)
		}
	})
}
