package tensorbuf

import "unsafe"

// Single-row adds to host rings.
//
// An Add of one step of one row (one env per actor, the common case) is
// mostly per-call work around a copy of one step. When every ring arena
// is host memory (hostArena, as the cpu backend's are), the writer copies
// that step itself from a plan made at New, instead of handing the
// columns to Backend.Scatter, which validates each column's layout and
// every index again on every call: here the buffer made the layout and
// the slot, and stage checked every source's length. Adds of several
// rows or steps, and device sources, go through the backend as before
// (its non-temporal stores serve large multi-row scatters).

// hostRow is one column's ring as the single-row path writes it: step
// slot k's bytes are ring[k*stride+off : k*stride+off+size].
type hostRow struct {
	ring   []byte
	stride int64
	off    int64
	size   int64
	word   bool // size 4 with every slot's bytes 4-byte aligned: one typed store
}

// planHostRows sets b.hostRows from b.ring when every column's arena is
// host memory; otherwise it leaves it nil and every add uses the backend.
func (b *Buffer) planHostRows() {
	if noHostRows {
		return
	}
	rows := make([]hostRow, len(b.ring))
	for c := range b.ring {
		col := &b.ring[c]
		a, ok := col.Ring.(hostArena)
		if !ok {
			return
		}
		ring := a.Bytes()
		st := col.RingStride()
		if steps, ok := col.RingSteps(int64(len(ring))); !ok || steps < int64(b.numEnvs)*b.capacity {
			return // not a layout this path can trust: let the backend refuse it
		}
		base := uintptr(unsafe.Pointer(unsafe.SliceData(ring))) + uintptr(col.Offset)
		rows[c] = hostRow{ring: ring, stride: st, off: col.Offset, size: col.StepBytes,
			word: col.StepBytes == 4 && st%4 == 0 && base%4 == 0}
	}
	b.hostRows = rows
}

// noHostRows, set by tests, makes new buffers write every add through the
// backend, the reference the single-row path is checked against.
var noHostRows bool

// scatterHostRow writes src[c], one step of column c, to ring slot ix of
// every column. The caller holds b.mu; ix is a slot of the buffer and each
// src[c] holds exactly the column's step bytes (stage checked them).
func (b *Buffer) scatterHostRow(src [][]byte, ix int64) {
	for c := range b.hostRows {
		h := &b.hostRows[c]
		o := ix*h.stride + h.off
		s := src[c]
		if h.word && uintptr(unsafe.Pointer(unsafe.SliceData(s)))%4 == 0 {
			_ = h.ring[o+3]
			_ = s[3]
			*(*uint32)(unsafe.Pointer(&h.ring[o])) = *(*uint32)(unsafe.Pointer(&s[0]))
			continue
		}
		copy(h.ring[o:o+h.size], s[:h.size])
	}
}
