package tensorbuf

import (
	"math"
	"math/bits"
	"math/rand/v2"
	"testing"

	"github.com/trajring/trajring/internal/philox"
)

// TestDrawFirstRowIsQuotient checks the identity drawFirst relies on:
// Index(x, rows) == Index(x, rows*per) / per, for random draws and for
// draws at and around every row boundary x = ceil(j*2^64/rows).
func TestDrawFirstRowIsQuotient(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	check := func(x, rows, per uint64) {
		u := philox.Index(x, rows*per)
		if got := philox.Index(x, rows); got != u/per {
			t.Fatalf("x %#x rows %d per %d: Index(x, rows) %d, Index(x, total)/per %d", x, rows, per, got, u/per)
		}
	}
	for range 20000 {
		rows := 1 + rng.Uint64N(1<<12)
		per := 1 + rng.Uint64N(1<<20)
		if rng.IntN(4) == 0 {
			per = 1 + rng.Uint64N(math.MaxUint64/rows)
		}
		check(rng.Uint64(), rows, per)
		for _, x := range []uint64{0, 1, math.MaxUint64, math.MaxUint64 - 1} {
			check(x, rows, per)
		}
		j := rng.Uint64N(rows)
		q, r := bits.Div64(j, 0, rows) // j*2^64/rows
		if r != 0 {
			q++
		}
		for _, x := range []uint64{q - 1, q, q + 1} {
			check(x, rows, per)
		}
	}
}
