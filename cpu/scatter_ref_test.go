package cpu_test

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/trajring/trajring/cpu"
	"github.com/trajring/trajring/kernels"
)

// TestScatterMatchesReference runs Scatter over random packed records
// (fields of 1 to 300 bytes, 4- and 8-byte ones at aligned and unaligned
// offsets, plus a column on its own ring) and random slots, repeats
// included, against the loop its doc comment spells out.
func TestScatterMatchesReference(t *testing.T) {
	be := cpu.New()
	rng := rand.New(rand.NewPCG(7, 8))
	for trial := range 300 {
		sizes := make([]int64, 1+rng.IntN(6))
		var stride int64
		for i := range sizes {
			sizes[i] = []int64{1, 3, 4, 8, 12, 40, 300}[rng.IntN(7)]
			stride += sizes[i]
		}
		stride += rng.Int64N(9)
		steps := 1 + rng.Int64N(50)
		packed := arena(t, be, steps*stride)
		fillRandom(rng, packed.Bytes())
		own := arena(t, be, steps*sizes[0])
		fillRandom(rng, own.Bytes())
		idx := make([]int64, 1+rng.IntN(20))
		for i := range idx {
			idx[i] = rng.Int64N(steps)
		}
		var cols []kernels.Column
		var src [][]byte
		var off int64
		for i, s := range sizes {
			col := kernels.Column{Ring: packed, StepBytes: s, Stride: stride, Offset: off}
			off += s
			if i == 0 && trial%3 == 0 {
				col = kernels.Column{Ring: own, StepBytes: s}
			}
			cols = append(cols, col)
			// An unaligned source now and then (a slice one byte in).
			b := make([]byte, int64(len(idx))*s+1)
			fillRandom(rng, b)
			src = append(src, b[rng.IntN(2):][:int64(len(idx))*s])
		}
		want := [][]byte{bytes.Clone(packed.Bytes()), bytes.Clone(own.Bytes())}
		for c := range cols {
			w := want[0]
			if cols[c].Ring == kernels.Arena(own) {
				w = want[1]
			}
			s, r, o := cols[c].StepBytes, cols[c].RingStride(), cols[c].Offset
			for i, ix := range idx {
				copy(w[ix*r+o:ix*r+o+s], src[c][int64(i)*s:int64(i+1)*s])
			}
		}
		if err := be.Scatter(cols, src, idx); err != nil {
			t.Fatalf("trial %d: %v", trial, err)
		}
		if !bytes.Equal(packed.Bytes(), want[0]) || !bytes.Equal(own.Bytes(), want[1]) {
			t.Fatalf("trial %d: rings differ from the reference (sizes %v, stride %d)", trial, sizes, stride)
		}
	}
}

// TestScatterReportsFirstFault: a scatter with faults in several columns
// names the first column's, and writes nothing.
func TestScatterReportsFirstFault(t *testing.T) {
	be := cpu.New()
	small, big := arena(t, be, 4*4), arena(t, be, 8*4)
	fillRandom(rand.New(rand.NewPCG(1, 1)), big.Bytes())
	before := bytes.Clone(big.Bytes())
	cases := []struct {
		name string
		cols []kernels.Column
		src  [][]byte
		idx  []int64
		want string
	}{
		{"index past the first ring, short second source",
			[]kernels.Column{{Ring: small, StepBytes: 4}, {Ring: big, StepBytes: 4}}, [][]byte{make([]byte, 8), make([]byte, 4)}, []int64{1, 5},
			"column 0: "},
		{"short first source, index past the second ring",
			[]kernels.Column{{Ring: big, StepBytes: 4}, {Ring: small, StepBytes: 4}}, [][]byte{make([]byte, 4), make([]byte, 8)}, []int64{1, 5},
			"column 0: 4 source bytes for 2 steps of 4"},
		{"index past the second, smaller ring",
			[]kernels.Column{{Ring: big, StepBytes: 4}, {Ring: small, StepBytes: 4}}, [][]byte{make([]byte, 8), make([]byte, 8)}, []int64{1, 5},
			"column 1: "},
		{"index at the ring's end",
			[]kernels.Column{{Ring: big, StepBytes: 4}, {Ring: small, StepBytes: 4}}, [][]byte{make([]byte, 4), make([]byte, 4)}, []int64{4},
			"column 1: "},
		{"negative index",
			[]kernels.Column{{Ring: big, StepBytes: 4}}, [][]byte{make([]byte, 8)}, []int64{-1, 0},
			"column 0: "},
	}
	for _, tc := range cases {
		err := be.Scatter(tc.cols, tc.src, tc.idx)
		if !errors.Is(err, cpu.ErrBounds) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want ErrBounds naming %q", tc.name, err, tc.want)
		}
		if !bytes.Equal(big.Bytes(), before) {
			t.Fatalf("%s: a refused scatter wrote the ring", tc.name)
		}
	}
}
