package rowmove

import (
	"bytes"
	"math/rand/v2"
	"testing"
	"unsafe"
)

// TestRowsMatchesCopy moves rows of every size from 1 to 2*MaxSize+3,
// at strides from the size to size+37, unaligned source and destination
// offsets, against rowsGo, with guard bytes around the destination.
func TestRowsMatchesCopy(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	const guard = 64
	for size := int64(1); size <= 2*MaxSize+3; size++ {
		for _, extra := range []int64{0, 1, 4, 37} {
			stride := size + extra
			const steps, n = 50, 33
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
				want[i] = byte(i * 7)
				got[i] = byte(i * 7)
			}
			s := unsafe.Pointer(&src[so])
			rowsGo(unsafe.Pointer(&want[guard+do]), s, idx, stride, size)
			Rows(unsafe.Pointer(&got[guard+do]), s, idx, stride, size)
			if !bytes.Equal(got, want) {
				t.Fatalf("size %d stride %d: rows differ from copy", size, stride)
			}
			Rows(unsafe.Pointer(&got[guard+do]), s, nil, stride, size)
			if !bytes.Equal(got, want) {
				t.Fatalf("size %d stride %d: an empty move wrote", size, stride)
			}
		}
	}
}
