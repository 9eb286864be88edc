package nbsync

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"testing"

	"github.com/kovn/kovn/pkg/cluster/topology"
)

// BenchmarkPodShard measures applying one new pod's shard beside N existing pods on the
// in-memory NB (`go test -bench PodShard ./pkg/cluster/nbsync`). The figure should not grow
// with N: that is what per-object shards are for.
func BenchmarkPodShard(b *testing.B) {
	for _, existing := range benchSizes() {
		b.Run(fmt.Sprintf("existing=%d", existing), func(b *testing.B) {
			c := connect(b)
			base(b, c)
			for i := 0; i < existing; i++ {
				if _, err := Apply(context.Background(), c, topology.ForPod(pod(fmt.Sprintf("p%d", i), "n1", fmt.Sprintf("10.16.%d.%d", 1+i/250, 1+i%250)))); err != nil {
					b.Fatal(err)
				}
			}
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				sh := topology.ForPod(pod(fmt.Sprintf("new%d", i), "n2", fmt.Sprintf("10.17.%d.%d", i/250, 1+i%250)))
				if _, err := Apply(context.Background(), c, sh); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func benchSizes() []int {
	if s := os.Getenv("KOVN_BENCH_PODS"); s != "" {
		n, _ := strconv.Atoi(s)
		return []int{n}
	}
	return []int{10, 1000, 3000}
}

// BenchmarkPodPlan measures only kovn's side of a pod event — reading the cache and building
// the operations — beside N existing pods, without the in-memory server's own cost.
func BenchmarkPodPlan(b *testing.B) {
	for _, existing := range benchSizes() {
		b.Run(fmt.Sprintf("existing=%d", existing), func(b *testing.B) {
			c := connect(b)
			base(b, c)
			for i := 0; i < existing; i++ {
				if _, err := Apply(context.Background(), c, topology.ForPod(pod(fmt.Sprintf("p%d", i), "n1", fmt.Sprintf("10.16.%d.%d", 1+i/250, 1+i%250)))); err != nil {
					b.Fatal(err)
				}
			}
			sh := topology.ForPod(pod("new", "n2", "10.17.0.1"))
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if _, _, err := Plan(context.Background(), c, sh); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
