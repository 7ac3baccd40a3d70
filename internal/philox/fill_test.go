package philox

import (
	"math"
	"math/rand/v2"
	"testing"
)

// impls names Fill's loops for tests and benchmarks.
var impls = []struct {
	name string
	impl int
}{{"go", implGo}, {"avx2", implAVX2}, {"avx512", implAVX512}}

// eachImpl runs f with Fill switched to each set of loops this CPU can
// run, logs the ones it cannot, and restores the widest.
func eachImpl(t testing.TB, f func(name string)) {
	defer setImpl(implAVX512)
	defer setImpl(implAVX2)
	for _, im := range impls {
		if !setImpl(im.impl) {
			t.Logf("%s: not run, this CPU lacks it", im.name)
			continue
		}
		f(im.name)
	}
}

// TestFillVectorMatchesDraw checks Fill against Draw for lengths around
// the vector loops' 16 and 64 draws and well past them, from even and odd
// starts (up to the last counters below 2^32), over random seeds, streams
// and calls, with a guard value after the slice; with each set of loops
// the CPU can run (the Go loop alone, AVX2, AVX-512).
func TestFillVectorMatchesDraw(t *testing.T) {
	lengths := []int{15, 16, 17, 18, 19, 20, 31, 32, 33, 47, 48, 63, 64, 65, 66, 79, 80, 81, 100, 127, 128, 129, 144, 256, 257, 1000}
	starts := []uint32{0, 1, 2, 3, 15, 16, 17, 63, 64, 1 << 31, math.MaxUint32 - 1100}
	eachImpl(t, func(impl string) {
		rng := rand.New(rand.NewPCG(9, 10))
		for trial := range 20 {
			seed, call, stream := rng.Uint64(), rng.Uint64(), rng.Uint32()
			if trial == 0 {
				seed, call, stream = math.MaxUint64, math.MaxUint64, math.MaxUint32
			}
			for _, n := range lengths {
				for _, k0 := range starts {
					dst := make([]uint64, n+1)
					dst[n] = 12345
					Fill(dst[:n], seed, stream, call, k0)
					for i := range n {
						if want := Draw(seed, stream, call, k0+uint32(i)); dst[i] != want {
							t.Fatalf("%s: Fill(k=%d, n=%d)[%d] = %#x, want %#x", impl, k0, n, i, dst[i], want)
						}
					}
					if dst[n] != 12345 {
						t.Fatalf("%s: Fill(k=%d, n=%d) wrote past its slice", impl, k0, n)
					}
				}
			}
		}
	})
}

// BenchmarkFill times 256 draws (a B=256 sample's) with each set of loops.
func BenchmarkFill(b *testing.B) {
	dst := make([]uint64, 256)
	eachImpl(b, func(impl string) {
		b.Run(impl, func(b *testing.B) {
			for b.Loop() {
				Fill(dst, 1, 2, 3, 0)
			}
		})
	})
}
