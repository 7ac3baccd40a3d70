// Package kernels holds trajring's data-movement kernels: the CUDA sources
// (one kernel per .cu file), the PTX and fatbins (sm_80 and sm_90 code plus
// compute_80 PTX) compiled from them, and the plain-data types that
// describe a kernel launch to every backend.
//
// The types here are shared by the cpu backend (which runs the reference
// loops in Go) and the gpu backend (which loads the fatbins), so that
// package tensorbuf can describe one data movement once and hand it to
// either. They carry no behaviour of their own.
package kernels

import (
	"fmt"
	"slices"
)

// Arena is one block of backend memory: host memory for the cpu backend,
// device memory for the gpu backend. Offsets into an arena are in bytes.
type Arena interface {
	// Size returns the arena's length in bytes.
	Size() int64
}

// Column describes one field's part of a data movement.
//
// A ring arena holds numEnvs*capacity steps, one every Stride bytes;
// step number k = row*capacity+slot of the column is the StepBytes bytes
// at byte offset k*Stride+Offset. Stride 0 means StepBytes (a ring of the
// column alone, Offset 0). Several columns may share one ring arena, each
// at its own Offset into a record of Stride bytes per step (packed
// records: the columns of a step share its cache lines); a column needs
// 0 <= Offset and Offset+StepBytes <= Stride, and its ring holds
// Ring.Size()/Stride steps (see RingSteps). Out (and NextOut, for Concat)
// are the destinations, written from byte offset OutOff (NextOff) as a
// dense run of steps of StepBytes, whatever the ring's stride.
type Column struct {
	Ring      Arena
	StepBytes int64
	// Stride is the bytes from one step of the ring to the next; 0 means
	// StepBytes.
	Stride int64
	// Offset is the byte offset of the column's bytes within a step's
	// record of Stride bytes.
	Offset int64

	Out    Arena
	OutOff int64

	// NextOut receives the successors gathered by Concat; nil elsewhere,
	// and nil in Concat for columns that need no successor.
	NextOut Arena
	NextOff int64

	// Pad is the byte pattern of one pad step written by GatherWindows;
	// nil means zeros. When set, len(Pad) == StepBytes.
	Pad []byte
}

// RingStride returns the bytes from one ring step to the next: Stride, or
// StepBytes when Stride is 0.
func (c *Column) RingStride() int64 {
	if c.Stride == 0 {
		return c.StepBytes
	}
	return c.Stride
}

// RingSteps returns the number of steps a ring arena of size bytes holds
// for the column, and false when the column's StepBytes, Stride and
// Offset are not a valid layout (StepBytes > 0, Offset >= 0,
// Offset+StepBytes <= the stride). Step k < steps lies within the arena:
// k*stride+Offset+StepBytes <= steps*stride <= size.
func (c *Column) RingSteps(size int64) (steps int64, ok bool) {
	st := c.RingStride()
	if c.StepBytes <= 0 || c.Offset < 0 || c.Offset > st-c.StepBytes || size < 0 {
		return 0, false
	}
	return size / st, true
}

// Window is one sequence read by GatherWindows: Len real steps of env row
// Row starting at absolute step Start (slot Start % capacity), followed by
// seqLen-Len pad steps.
type Window struct {
	Row   int64
	Start int64
	Len   int64
}

// Fits reports whether count items of size bytes from byte offset off lie
// within an arena of arenaSize bytes. It cannot overflow: backends check
// every launch with it before touching memory.
func Fits(off, count, size, arenaSize int64) bool {
	return off >= 0 && count >= 0 && size > 0 && off <= arenaSize && count <= (arenaSize-off)/size
}

// Mul returns a*b for non-negative a and b, and false when the product
// overflows int64.
func Mul(a, b int64) (int64, bool) {
	if a < 0 || b < 0 || (a > 0 && b > (1<<63-1)/a) {
		return 0, false
	}
	return a * b, true
}

// WritesRing returns the index of the first column whose Out or NextOut
// is the Ring of any column, and true; a gather must never write the
// arenas it reads (the CUDA kernels read rings through the read-only
// cache, which is undefined for memory written in the same launch).
func WritesRing(cols []Column) (int, bool) {
	// The distinct rings first: columns share a few (the record arena),
	// and comparing every pair of columns' interfaces was 2% of a
	// one-item sample.
	var buf [8]Arena
	rings := buf[:0]
	for r := range cols {
		if !slices.Contains(rings, cols[r].Ring) {
			rings = append(rings, cols[r].Ring)
		}
	}
	for c := range cols {
		if slices.Contains(rings, cols[c].Out) || (cols[c].NextOut != nil && slices.Contains(rings, cols[c].NextOut)) {
			return c, true
		}
	}
	return 0, false
}

// WindowSteps checks the arguments of a window gather that do not depend
// on a backend's memory and returns the output steps, len(wins)*seqLen;
// problem describes the first fault, empty when there is none.
func WindowSteps(cols []Column, wins []Window, seqLen, capacity int64) (n int64, problem string) {
	if seqLen <= 0 || capacity <= 0 {
		return 0, fmt.Sprintf("sequence length %d, capacity %d", seqLen, capacity)
	}
	if c, bad := WritesRing(cols); bad {
		return 0, fmt.Sprintf("column %d writes a ring arena", c)
	}
	n, ok := Mul(int64(len(wins)), seqLen)
	if !ok {
		return 0, fmt.Sprintf("%d windows of %d steps", len(wins), seqLen)
	}
	return n, ""
}

// BadWindow returns the index of the first window outside rows rows or
// longer than maxLen steps, and true; windows start at absolute steps, so
// any Start >= 0 is valid.
func BadWindow(wins []Window, rows, maxLen int64) (int, bool) {
	for i, w := range wins {
		if w.Row < 0 || w.Row >= rows || w.Start < 0 || w.Len < 0 || w.Len > maxLen {
			return i, true
		}
	}
	return 0, false
}
