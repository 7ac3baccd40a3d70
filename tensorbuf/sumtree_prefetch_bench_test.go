package tensorbuf

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/trajring/trajring/internal/prefetch"
)

// BenchmarkSumTreePrefetch times findMany over a million weights (levels
// of 8 MiB, 1 MiB, ... past the caches) with the prefetch of each next
// level's groups (prefetch.Rows32; t0) and without (none), the draws
// formed in each call included:
//
//	go test -run '^$' -bench SumTreePrefetch -count 5 ./tensorbuf/
func BenchmarkSumTreePrefetch(b *testing.B) {
	const slots = 1 << 20
	var t sumTree
	t.grow(slots)
	for s := range slots {
		t.set(s, math.Pow(float64(1+s%16), 0.6))
	}
	defer func() { treePrefetch = prefetch.Enabled }()
	for _, n := range []int{256, 4096, 65536} {
		rng := rand.New(rand.NewPCG(1, 2))
		us, out := make([]float64, n), make([]int32, n)
		for _, name := range []string{"none", "t0"} {
			b.Run("B="+itoa(n)+"/"+name, func(b *testing.B) {
				if name == "t0" && !prefetch.Enabled {
					b.Skip("prefetches are no-ops in this build")
				}
				treePrefetch = name == "t0"
				for b.Loop() {
					for k := range us {
						us[k] = rng.Float64() * t.total()
					}
					t.findMany(us, out)
				}
			})
		}
	}
}
