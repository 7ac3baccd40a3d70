package philox

import (
	"math"
	"testing"
)

// TestKnownAnswers checks Block against the Philox4x32-10 known-answer
// vectors published with Random123 (kat_vectors): counter, key, result.
func TestKnownAnswers(t *testing.T) {
	for _, tc := range []struct {
		c    [4]uint32
		k    [2]uint32
		want [4]uint32
	}{
		{[4]uint32{0, 0, 0, 0}, [2]uint32{0, 0}, [4]uint32{0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}},
		{[4]uint32{0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff}, [2]uint32{0xffffffff, 0xffffffff},
			[4]uint32{0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}},
		{[4]uint32{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344}, [2]uint32{0xa4093822, 0x299f31d0},
			[4]uint32{0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}},
	} {
		if got := Block(tc.c, tc.k); got != tc.want {
			t.Errorf("Block(%08x, %08x) = %08x, want %08x", tc.c, tc.k, got, tc.want)
		}
	}
}

// TestDrawLayout pins how Draw lays out its counter and key: draws 2j
// and 2j+1 are the two halves of block j.
func TestDrawLayout(t *testing.T) {
	seed, call, stream := uint64(0x299f31d0a4093822), uint64(0x0370734413198a2e), uint32(0x85a308d3)
	for k, want := range map[uint32]uint64{
		2 * 0x243f6a88:     0x94fdcceb<<32 | 0xd16cfe09, // the third known answer
		2*0x243f6a88 + 1:   0x24126ea1<<32 | 0x5001e420,
		0:                  Draw(seed, stream, call, 0), // (checked by Fill below)
		math.MaxUint32:     Draw(seed, stream, call, math.MaxUint32),
		math.MaxUint32 - 1: Draw(seed, stream, call, math.MaxUint32-1),
	} {
		if got := Draw(seed, stream, call, k); got != want {
			t.Errorf("Draw(k=%#x) = %#x, want %#x", k, got, want)
		}
	}
	// Fill agrees with Draw from even and odd starts, for every length
	// around its unrolling.
	for _, k0 := range []uint32{0, 1, 2, 7, math.MaxUint32 - 40} {
		for n := range 13 {
			dst := make([]uint64, n+1)
			dst[n] = 12345 // guard
			Fill(dst[:n], seed, stream, call, k0)
			for i := range n {
				if want := Draw(seed, stream, call, k0+uint32(i)); dst[i] != want {
					t.Fatalf("Fill(k=%d, n=%d)[%d] = %#x, want %#x", k0, n, i, dst[i], want)
				}
			}
			if dst[n] != 12345 {
				t.Fatalf("Fill(k=%d, n=%d) wrote past its slice", k0, n)
			}
		}
	}
}

func TestIndexAndFloat(t *testing.T) {
	for _, tc := range []struct{ x, n, want uint64 }{
		{0, 10, 0},
		{math.MaxUint64, 10, 9},
		{1 << 63, 10, 5},
		{1 << 63, 1, 0},
		{math.MaxUint64, math.MaxUint64, math.MaxUint64 - 1},
		{0x123456789abcdef0, 1000, 71},
	} {
		if got := Index(tc.x, tc.n); got != tc.want {
			t.Errorf("Index(%#x, %d) = %d, want %d", tc.x, tc.n, got, tc.want)
		}
	}
	if f := Float64(math.MaxUint64); f >= 1 || f != 1-0x1p-53 {
		t.Errorf("Float64(max) = %v, want 1-2^-53", f)
	}
	if f := Float64(1 << 63); f != 0.5 {
		t.Errorf("Float64(1<<63) = %v, want 0.5", f)
	}
}

// TestChiSquare draws 2^18 indices into 64 cells for a few (seed,
// stream, call) triples and checks Pearson's statistic against the
// 99.99th percentile of chi-square with 63 degrees of freedom (about
// 117.9): a correct generator fails it about once in ten thousand tries
// per triple, a broken one (a constant word, a lost counter word) always.
func TestChiSquare(t *testing.T) {
	const cells, n = 64, 1 << 18
	for _, tc := range []struct {
		seed   uint64
		stream uint32
		call   uint64
	}{{1, 0, 0}, {0xdeadbeef, 1, 7}, {42, 3, 1 << 40}} {
		var count [cells]int
		for k := range uint32(n) {
			count[Index(Draw(tc.seed, tc.stream, tc.call, k), cells)]++
		}
		exp := float64(n) / cells
		chi := 0.0
		for _, c := range count {
			d := float64(c) - exp
			chi += d * d / exp
		}
		if chi > 117.9 {
			t.Errorf("seed %d stream %d call %d: chi-square %.1f over 63 dof", tc.seed, tc.stream, tc.call, chi)
		}
	}
	// Neighbouring calls and streams must not repeat each other's draws.
	seen := map[uint64]bool{}
	for call := range uint64(16) {
		for stream := range uint32(4) {
			for k := range uint32(64) {
				x := Draw(9, stream, call, k)
				if seen[x] {
					t.Fatalf("draw %#x repeated (call %d stream %d k %d)", x, call, stream, k)
				}
				seen[x] = true
			}
		}
	}
}
