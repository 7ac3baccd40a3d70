package rowmove

import (
	"bytes"
	"math/rand/v2"
	"slices"
	"testing"
	"unsafe"
)

// eachWidth runs f with the 16-byte loops, then with the 32-byte ones
// where the CPU has them, and restores the setting.
func eachWidth(t *testing.T, f func(t *testing.T)) {
	defer setWide(setWide(false))
	t.Run("16", f)
	if setWide(true); useAVX2 {
		t.Run("32", f)
	} else {
		t.Log("32-byte loops not run: this CPU lacks AVX2")
	}
}

// TestRowsMatchesCopy moves rows of every size from 1 to 2*MaxSize+3,
// at strides from the size to size+37, unaligned source and destination
// offsets, against rowsGo, with guard bytes around the destination; with
// each width of loops.
func TestRowsMatchesCopy(t *testing.T) {
	eachWidth(t, func(t *testing.T) {
		rng := rand.New(rand.NewPCG(1, 2))
		for size := int64(1); size <= 2*MaxSize+3; size++ {
			for _, extra := range []int64{0, 1, 4, 37} {
				checkRows(t, rng, size, size+extra, 50, 33)
			}
		}
	})
}

// TestLargeRowsMatchCopy moves rows past MaxSize, around repMin and far
// beyond it (a pixel step) as TestRowsMatchesCopy does, with the REP MOVSB
// loop and without it.
func TestLargeRowsMatchCopy(t *testing.T) {
	defer setRep(setRep(false))
	for _, rep := range []bool{false, true} {
		if setRep(rep); useRep != rep {
			t.Log("REP MOVSB loop not run: this CPU lacks ERMS")
			continue
		}
		rng := rand.New(rand.NewPCG(5, 6))
		for _, size := range []int64{129, 200, repMin - 1, repMin, repMin + 1, 300, 1000, 3072, 3093, 8192} {
			for _, extra := range []int64{0, 1, 37} {
				checkRows(t, rng, size, size+extra, 20, 17)
			}
		}
	}
}

// checkRows moves n random rows of a ring of steps rows of size bytes,
// stride apart, with Rows and with rowsGo from and to unaligned offsets,
// and fails unless the outputs and the guard bytes around them agree; an
// empty move must write nothing.
func checkRows(t *testing.T, rng *rand.Rand, size, stride, steps, n int64) {
	t.Helper()
	const guard = 64
	src := make([]byte, steps*stride+7)
	for i := range src {
		src[i] = byte(rng.Uint32())
	}
	idx := make([]int64, n)
	for i := range idx {
		idx[i] = rng.Int64N(steps)
	}
	so, do := rng.Int64N(8), rng.Int64N(8)
	want := make([]byte, n*size+2*guard+8)
	got := make([]byte, len(want))
	for i := range want {
		want[i], got[i] = byte(i*7), byte(i*7)
	}
	s := unsafe.Pointer(&src[so])
	rowsGo(unsafe.Pointer(&want[guard+do]), s, idx, stride, size)
	Rows(unsafe.Pointer(&got[guard+do]), s, idx, stride, size)
	if !bytes.Equal(got, want) {
		t.Fatalf("size %d stride %d (rep %v): rows differ from copy", size, stride, useRep)
	}
	Rows(unsafe.Pointer(&got[guard+do]), s, nil, stride, size)
	if !bytes.Equal(got, want) {
		t.Fatalf("size %d stride %d: an empty move wrote", size, stride)
	}
	// RowsAhead moves the same rows whatever it prefetches: the rows two
	// places on, fewer or more records than rows, records whose span runs
	// past the ring (a prefetch never faults), or none.
	last := []int64{steps - 1, steps - 1, 0}
	for _, pf := range [][]int64{idx[min(2, n):], append(slices.Clone(idx), idx...), last, nil} {
		for _, span := range []int64{1, size, stride, 4 * stride} {
			ahead := make([]byte, len(want))
			for i := range ahead {
				ahead[i] = byte(i * 7)
			}
			RowsAhead(unsafe.Pointer(&ahead[guard+do]), s, idx, pf, stride, size, Ahead{Base: s, Stride: stride, Span: span})
			if !bytes.Equal(ahead, want) {
				t.Fatalf("size %d stride %d (rep %v): RowsAhead (%d records of %d bytes ahead) differs from copy", size, stride, useRep, len(pf), span)
			}
			RowsAhead(unsafe.Pointer(&ahead[guard+do]), s, nil, pf, stride, size, Ahead{Base: s, Stride: stride, Span: span})
			if !bytes.Equal(ahead, want) {
				t.Fatalf("size %d stride %d: an empty RowsAhead wrote", size, stride)
			}
		}
	}
}

// TestColsMatchesRows moves several columns of a packed record, of every
// size class, in one Cols call against Rows per column, with guard bytes.
func TestColsMatchesRows(t *testing.T) { eachWidth(t, testColsMatchesRows) }

func testColsMatchesRows(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	const guard = 48
	for trial := range 300 {
		nc := 1 + rng.IntN(8)
		sizes := make([]int64, nc)
		var stride int64
		for i := range sizes {
			sizes[i] = 4 + rng.Int64N(MaxSize-3)
			stride += sizes[i]
		}
		stride += rng.Int64N(5)
		const steps = 40
		n := rng.IntN(40)
		src := make([]byte, steps*stride+3)
		for i := range src {
			src[i] = byte(rng.Uint32())
		}
		idx := make([]int64, n)
		for i := range idx {
			idx[i] = rng.Int64N(steps)
		}
		first := rng.Int64N(5)
		var cs []Col
		var got, want [][]byte
		var off int64
		for _, s := range sizes {
			g := make([]byte, guard+(first+int64(n))*s+guard)
			for i := range g {
				g[i] = byte(i * 13)
			}
			w := bytes.Clone(g)
			Rows(unsafe.Pointer(&w[guard+first*s]), unsafe.Pointer(&src[off]), idx, stride, s)
			cs = append(cs, Col{Dst: unsafe.Pointer(&g[guard]), Src: unsafe.Pointer(&src[off]), Stride: stride, Size: s})
			got, want = append(got, g), append(want, w)
			off += s
		}
		Cols(cs, idx, first)
		for c := range cs {
			if !bytes.Equal(got[c], want[c]) {
				t.Fatalf("trial %d column %d (%d bytes): Cols differs from Rows", trial, c, sizes[c])
			}
		}
	}
}

// TestRowsAllocatesNothing: Rows hands cols a column on its stack.
func TestRowsAllocatesNothing(t *testing.T) {
	src, dst := make([]byte, 64*40), make([]byte, 40*8)
	idx := []int64{3, 1, 7, 0, 5, 2, 6, 4}
	if n := testing.AllocsPerRun(100, func() {
		Rows(unsafe.Pointer(&dst[0]), unsafe.Pointer(&src[0]), idx, 64, 40)
	}); n != 0 {
		t.Fatalf("Rows allocates %v times per call", n)
	}
}
