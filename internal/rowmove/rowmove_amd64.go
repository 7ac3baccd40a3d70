//go:build amd64 && !purego

package rowmove

import (
	"unsafe"

	"github.com/trajring/trajring/internal/impl"
	"golang.org/x/sys/cpu"
)

const enabled = true

// useAVX2 makes cols move rows of 33 to 128 bytes as 32-byte words
// instead of 16-byte ones (read by the assembly; internal/impl's
// "rowmove"/"wide" switches it, on where the CPU has AVX2): half the
// loads and stores a row, which BenchmarkRows shows faster.
var useAVX2 bool

func init() {
	impl.Register("rowmove", "wide", cpu.X86.HasAVX2, func(on bool) { useAVX2 = on })
	impl.Register("rowmove", "rep", cpu.X86.HasERMS, func(on bool) { useRep = on })
}

// rows is Rows for 4 <= size <= MaxSize: one column of cols (the
// assembly loop is written once).
func rows(dst, src unsafe.Pointer, idx []int64, stride, size int64) {
	c := Col{Dst: dst, Src: src, Stride: stride, Size: size}
	cols(unsafe.Pointer(&c), 1, idx, 0)
}

// cols is Cols over n columns from cs. BenchmarkRows shows its win over
// copy per row (rowsGo) for every size class, and that of its 32-byte
// words (useAVX2) over its 16-byte ones for rows of 33 to 128 bytes.
//
//go:noescape
func cols(cs unsafe.Pointer, n int, idx []int64, first int64)

// useRep makes Rows move rows of repMin bytes or more with REP MOVSB
// (rowsRep): internal/impl's "rowmove"/"rep" switches it, on where the
// CPU has enhanced REP MOVSB.
var useRep bool

// repMin is the smallest row Rows moves with rowsRep (where useRep is
// set): from there REP MOVSB, which need not read the destination lines
// it overwrites whole, is no slower than copy on rows gathered from a
// ring past the caches, and faster at a few hundred bytes, where at 160
// bytes it is slower (BenchmarkRowsRep).
const repMin = 256

// rowsRep is Rows for rows of repMin bytes or more: REP MOVSB a row
// (rowsRepAhead's loop with nothing to prefetch). BenchmarkRowsRep
// compares it with copy per row on the gathers' path.
func rowsRep(dst, src unsafe.Pointer, idx []int64, stride, size int64) {
	rowsRepAhead(dst, src, idx, nil, stride, size, nil, 0, 0)
}

// rowsRepAhead is RowsAhead for rows of repMin bytes or more: the
// record's prefetches (PREFETCHT0 of every 64th byte and of the last),
// then REP MOVSB a row.
//
//go:noescape
func rowsRepAhead(dst, src unsafe.Pointer, idx, pf []int64, stride, size int64, pfBase unsafe.Pointer, pfStride, pfSpan int64)
