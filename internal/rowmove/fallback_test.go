package rowmove

import (
	"bytes"
	"testing"
	"unsafe"
)

// TestColsGo checks Cols' portable loop (what cols is where there is no
// assembly) against Cols on the same columns: rows of every size class
// Fits takes, from a strided source, at an offset into the outputs.
func TestColsGo(t *testing.T) {
	src := make([]byte, 64*160)
	for i := range src {
		src[i] = byte(i*31 + i>>8)
	}
	idx := []int64{5, 0, 63, 17, 17, 40}
	const first = 3
	var want, got [][]byte
	var cs, gs []Col
	for _, size := range []int64{4, 7, 8, 16, 33, 68, 128} {
		w, g := make([]byte, (first+int64(len(idx)))*size), make([]byte, (first+int64(len(idx)))*size)
		want, got = append(want, w), append(got, g)
		src := unsafe.Pointer(&src[size%5])
		cs = append(cs, Col{Dst: unsafe.Pointer(&w[0]), Src: src, Stride: 150, Size: size})
		gs = append(gs, Col{Dst: unsafe.Pointer(&g[0]), Src: src, Stride: 150, Size: size})
	}
	Cols(cs, idx, first)
	colsGo(gs, idx, first)
	for i := range want {
		if !bytes.Equal(got[i], want[i]) {
			t.Errorf("column of %d-byte rows: colsGo differs from Cols", cs[i].Size)
		}
	}
}
