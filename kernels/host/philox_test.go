//go:build cgo

package host

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/trajring/trajring/internal/philox"
)

// TestPhiloxMatchesGo checks the C body that kernels compile against the
// Go twin the cpu backend uses, bit for bit, on the known answers, the
// edges of every argument and random inputs: a seeded sample draws the
// same items on both backends only if these agree.
func TestPhiloxMatchesGo(t *testing.T) {
	if got := PhiloxBlock([4]uint32{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344}, [2]uint32{0xa4093822, 0x299f31d0}); got != [4]uint32{0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1} {
		t.Fatalf("C Philox4x32-10 known answer = %08x", got)
	}
	r := rand.New(rand.NewPCG(1, 2))
	edges := []uint64{0, 1, 2, 3, math.MaxUint32, math.MaxUint32 + 1, 1 << 53, math.MaxInt64, math.MaxUint64 - 1, math.MaxUint64}
	pick := func() uint64 {
		if r.IntN(4) == 0 {
			return edges[r.IntN(len(edges))]
		}
		return r.Uint64() >> r.UintN(64)
	}
	for i := range 20000 {
		c := [4]uint32{uint32(pick()), uint32(pick()), uint32(pick()), uint32(pick())}
		k := [2]uint32{uint32(pick()), uint32(pick())}
		if got, want := PhiloxBlock(c, k), philox.Block(c, k); got != want {
			t.Fatalf("case %d: C Block(%08x, %08x) = %08x, Go %08x", i, c, k, got, want)
		}
		seed, stream, call, kk := pick(), uint32(pick()), pick(), uint32(pick())
		x := PhiloxDraw(seed, stream, call, kk)
		if want := philox.Draw(seed, stream, call, kk); x != want {
			t.Fatalf("case %d: C draw %#x, Go %#x", i, x, want)
		}
		for _, xx := range []uint64{x, pick()} {
			n := pick()
			if got, want := PhiloxIndex(xx, n), philox.Index(xx, n); got != want {
				t.Fatalf("case %d: C index(%#x, %d) = %d, Go %d", i, xx, n, got, want)
			}
			if got, want := PhiloxFloat(xx), philox.Float64(xx); math.Float64bits(got) != math.Float64bits(want) {
				t.Fatalf("case %d: C float(%#x) = %v, Go %v", i, xx, got, want)
			}
		}
	}
}
