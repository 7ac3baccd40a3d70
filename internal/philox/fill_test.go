package philox

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestFillVectorMatchesDraw checks Fill against Draw for lengths around
// the vector loop's 16 draws and well past it, from even and odd starts
// (up to the last counters below 2^32), over random seeds, streams and
// calls, with a guard value after the slice; and the same with the
// vector loop switched off.
func TestFillVectorMatchesDraw(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	lengths := []int{15, 16, 17, 18, 19, 20, 31, 32, 33, 47, 48, 63, 64, 65, 100, 256, 257, 1000}
	starts := []uint32{0, 1, 2, 3, 15, 16, 17, 1 << 31, math.MaxUint32 - 1100}
	for _, vec := range []bool{hasAVX2, false} {
		was := hasAVX2
		setAVX2(vec)
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
							t.Fatalf("vector %v: Fill(k=%d, n=%d)[%d] = %#x, want %#x", vec, k0, n, i, dst[i], want)
						}
					}
					if dst[n] != 12345 {
						t.Fatalf("vector %v: Fill(k=%d, n=%d) wrote past its slice", vec, k0, n)
					}
				}
			}
		}
		setAVX2(was)
	}
}
