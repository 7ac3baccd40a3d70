//go:build amd64 && !purego

package rowmove

import (
	"unsafe"

	"github.com/trajring/trajring/internal/impl"
	"golang.org/x/sys/cpu"
)

const enabled = true

// useAVX2 makes cols move rows of 33 to 128 bytes as 32-byte words
// instead of 16-byte ones (read by the assembly; tests switch it).
// Measured same-run (B=256 L=1 low-dim sample from a cached 10k-step
// buffer, whose 68-byte observation is one such column; medians of 10
// alternating runs of two test binaries): 3.57 -> 3.35 µs. 64-byte words
// (AVX-512) measured the same as 32-byte ones.
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
// (rowsRep) where the CPU has enhanced REP MOVSB (tests switch it).
var useRep bool

// repMin is the smallest row rowsRep moves. Measured same-run,
// interleaved (random rows of a 3 GiB ring with huge pages, prefetched a
// chunk of 16 rows ahead as the cpu gathers do; AMD EPYC family 26, two
// runs): REP MOVSB over copy 1.06-1.15x the time at 160-byte rows,
// 0.94-0.97x at 256, 0.84-0.92x at 384 to 512, 0.83-0.93x at 2 to 3 KiB
// (a B=256 pixel gather of 3,072-byte rows 73.1-73.9 -> 63.2-63.8 µs;
// reading the output afterwards costs the same after either, so the rows
// stay in the cache). Go's copy moves such rows with 32-byte vector
// loads and stores; the string move needs no read of the destination
// lines it overwrites whole.
const repMin = 256

// rowsRep is Rows for rows of repMin bytes or more: REP MOVSB a row.
// BenchmarkRowsRep compares it with copy per row on the gathers' path.
//
//go:noescape
func rowsRep(dst, src unsafe.Pointer, idx []int64, stride, size int64)
