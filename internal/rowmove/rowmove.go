// Package rowmove moves fixed-size rows gathered from a strided ring into
// a dense output: the inner loop of the cpu backend's gathers.
//
// On amd64 the loop is written in assembly with the size class chosen
// once per call: each row then moves as at most eight overlapping 16-byte
// loads and stores (two 4- or 8-byte ones for small rows), with no call
// per row. Go's copy calls runtime.memmove per row, whose size dispatch
// and call cost more than the move itself for rows of a few dozen bytes
// (BenchmarkRows).
package rowmove

import (
	"unsafe"

	"github.com/trajring/trajring/internal/impl"
	"github.com/trajring/trajring/internal/prefetch"
)

// MaxSize is the largest row Rows moves in its own loop; larger rows
// are moved with copy, where a call per row is cheap next to the move,
// or, from 256 bytes where the CPU has enhanced REP MOVSB (amd64), with
// one string move per row, which is faster there (see repMin).
const MaxSize = 128

// Rows moves row i of len(idx) rows of size bytes from src+idx[i]*stride
// to dst+i*size. The caller guarantees that every row lies within its
// memory and that the rows do not overlap the destination.
func Rows(dst, src unsafe.Pointer, idx []int64, stride, size int64) {
	if len(idx) == 0 || size <= 0 {
		return
	}
	if size >= 4 && size <= MaxSize && enabled {
		rows(dst, src, idx, stride, size)
		return
	}
	if size >= repMin && useRep {
		rowsRep(dst, src, idx, stride, size)
		return
	}
	rowsGo(dst, src, idx, stride, size)
}

// Ahead is the memory RowsAhead prefetches from: records Stride bytes
// apart from Base, Span bytes each (at least 1).
type Ahead struct {
	Base         unsafe.Pointer
	Stride, Span int64
}

// RowsAhead is Rows that, before moving row i, prefetches every cache
// line of record pf[i] of a (a.Base + pf[i]*a.Stride, a.Span bytes) for
// i < len(pf): given the rows a few places later, their lines arrive
// while the rows before them move. Rows of a few hundred bytes and more
// gathered from a ring past the caches need it: prefetching their first
// line only leaves the rest to the hardware's stream prefetcher, which
// starts too late for a row of a few dozen lines. The caller guarantees
// the memory as for Rows, and that each record pf[i] starts within the
// memory from a.Base (its address is computed in Go, where a pointer
// must not leave its allocation; the lines past it may).
func RowsAhead(dst, src unsafe.Pointer, idx, pf []int64, stride, size int64, a Ahead) {
	if len(idx) == 0 || size <= 0 {
		return
	}
	if size >= repMin && useRep && a.Span > 0 {
		rowsRepAhead(dst, src, idx, pf, stride, size, a.Base, a.Stride, a.Span)
		return
	}
	rowsAheadGo(dst, src, idx, pf, stride, size, a)
}

// rowsAheadGo is RowsAhead's portable loop.
func rowsAheadGo(dst, src unsafe.Pointer, idx, pf []int64, stride, size int64, a Ahead) {
	for i, ix := range idx {
		if i < len(pf) {
			prefetch.Span(unsafe.Add(a.Base, pf[i]*a.Stride), a.Span)
		}
		d := unsafe.Slice((*byte)(unsafe.Add(dst, int64(i)*size)), size)
		copy(d, unsafe.Slice((*byte)(unsafe.Add(src, ix*stride)), size))
	}
}

// rowsGo is Rows' portable loop: rowsAheadGo with nothing to prefetch.
func rowsGo(dst, src unsafe.Pointer, idx []int64, stride, size int64) {
	rowsAheadGo(dst, src, idx, nil, stride, size, Ahead{})
}

// Col is one column of a Cols move: rows of Size bytes, Stride bytes
// apart from Src, to the dense run at Dst.
type Col struct {
	Dst, Src     unsafe.Pointer
	Stride, Size int64
}

// Fits reports whether Cols moves rows of size bytes in its own loop.
func Fits(size int64) bool { return size >= 4 && size <= MaxSize }

// Cols moves rows idx of every column c, as Rows(c.Dst+first*c.Size,
// c.Src, idx, c.Stride, c.Size) would, in one call. Every column's Size
// must satisfy Fits. The caller guarantees the memory as for Rows.
func Cols(cs []Col, idx []int64, first int64) {
	if len(cs) == 0 || len(idx) == 0 {
		return
	}
	if enabled {
		cols(unsafe.Pointer(unsafe.SliceData(cs)), len(cs), idx, first)
		return
	}
	colsGo(cs, idx, first)
}

// colsGo is Cols' portable loop.
func colsGo(cs []Col, idx []int64, first int64) {
	for _, c := range cs {
		rowsGo(unsafe.Add(c.Dst, first*c.Size), c.Src, idx, c.Stride, c.Size)
	}
}

// setWide switches the 32-byte loops (internal/impl; on only where the
// CPU has AVX2) and returns the previous setting.
func setWide(on bool) bool {
	was := useAVX2
	impl.Set("rowmove", "wide", on)
	return was
}

// setRep switches the REP MOVSB loop (internal/impl; on only where the
// CPU has ERMS) and returns the previous setting.
func setRep(on bool) bool {
	was := useRep
	impl.Set("rowmove", "rep", on)
	return was
}
