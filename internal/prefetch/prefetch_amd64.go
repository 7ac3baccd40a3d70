//go:build amd64 && !purego

package prefetch

import "unsafe"

const enabled = true

// rows is Rows' loop, PREFETCHT0 of a row's first and last byte.
// BenchmarkRows shows its win on the cpu gathers' path (rows prefetched a
// chunk ahead of the copy).
//
//go:noescape
func rows(base unsafe.Pointer, idx []int64, stride, span int64)

// rows32 is Rows32's loop, one PREFETCHT0 a row. tensorbuf's
// BenchmarkSumTreePrefetch shows its win in the sum tree's descent (each
// next level's groups prefetched).
//
//go:noescape
func rows32(base unsafe.Pointer, idx []int32, stride int64)

// span is Span's loop: PREFETCHT0 of every 64th byte from p and of the
// last byte.
//
//go:noescape
func span(p unsafe.Pointer, n int64)
