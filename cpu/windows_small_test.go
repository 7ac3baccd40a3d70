package cpu

import (
	"bytes"
	"math/rand/v2"
	"testing"

	"github.com/trajring/trajring/kernels"
)

// TestWindowsSmallMatchesReference checks the one-step fast path of
// windowsColumn (steps of 16..256 bytes, a multiple of 4, in 16-byte
// words and a tail) against the
// plain reference: out[b] = ring step, or the pad (zeros without one) for
// an empty window; bytes after the output stay untouched.
func TestWindowsSmallMatchesReference(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for _, s := range []int64{16, 20, 24, 28, 32, 64, 68, 112, 252, 256} {
		for _, withPad := range []bool{false, true} {
			stride := s + 4*r.Int64N(6)
			const rows, capacity, n = 3, 5, 40
			ring := make([]byte, rows*capacity*stride)
			for i := range ring {
				ring[i] = byte(r.Uint32())
			}
			var pad []byte
			if withPad {
				pad = bytes.Repeat([]byte{0xab}, int(s))
			}
			wins := make([]kernels.Window, n)
			base := make([]int64, n)
			for b := range wins {
				wins[b] = kernels.Window{Row: r.Int64N(rows), Start: r.Int64N(100), Len: r.Int64N(2)}
				base[b] = wins[b].Row*capacity + wins[b].Start%capacity
			}
			out := make([]byte, n*s+7)
			for i := range out {
				out[i] = 0xee
			}
			windowsColumn(out, ring, pad, s, stride, wins, base, 1, capacity, 0, n)
			for b, w := range wins {
				got := out[int64(b)*s : int64(b+1)*s]
				want := make([]byte, s)
				switch {
				case w.Len == 1:
					copy(want, ring[base[b]*stride:])
				case withPad:
					copy(want, pad)
				}
				if !bytes.Equal(got, want) {
					t.Fatalf("s %d stride %d pad %v window %d %+v: got %x want %x", s, stride, withPad, b, w, got, want)
				}
			}
			if !bytes.Equal(out[n*s:], bytes.Repeat([]byte{0xee}, 7)) {
				t.Fatalf("s %d: guard bytes after the output changed", s)
			}
		}
	}
}
