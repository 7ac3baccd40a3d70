package cpu

import (
	"sync"
	"unsafe"

	"github.com/trajring/trajring/internal/fanout"
	"github.com/trajring/trajring/internal/prefetch"
	"github.com/trajring/trajring/internal/rowmove"
	"github.com/trajring/trajring/kernels"
)

// prefetchChunk is how many rows the gathers move between two rounds of
// prefetches: the next chunk's rows are prefetched, in every column,
// while the current chunk is moved, so that up to 2*prefetchChunk rows'
// cache misses are in flight instead of the few a copy loop overlaps
// (TestGatherSpeed compares it with a per-column loop in the same run).
// Records with a column of aheadMin bytes or more are prefetched whole,
// a few rows ahead, by that column's row moves instead.
const prefetchChunk = 16

// windowChunk is prefetchChunk for window gathers whose every column has
// steps of less than aheadMin bytes (low-dimensional records): twice as
// many windows prefetched ahead, because many small windows need more
// misses in flight to keep up with memory than a few large ones (the
// huge sweep's figures are in the commit that set it; pixel windows keep
// prefetchChunk).
const windowChunk = 32

// gatherPrefetch switches the gathers' software prefetch (tests and the
// interleaved measurement of TestGatherSpeed compare both ways).
var gatherPrefetch = prefetch.Enabled

// The loops below are the bodies of the movements whose reference loops the
// exported methods document. They differ from those loops only in speed:
// steps of 1, 4 or 8 aligned bytes move as one typed load and store instead
// of a copy call (the built-in columns are 4-byte steps), and a window's
// real steps move as at most two contiguous runs (split at the ring's wrap).

// word is the element type of a typed step move.
type word interface{ uint8 | uint32 | uint64 }

// words views b as a slice of T; ok is false when b is not aligned for T.
func words[T word](b []byte) (w []T, ok bool) {
	var z T
	size := int(unsafe.Sizeof(z))
	if len(b) == 0 {
		return nil, true
	}
	p := unsafe.Pointer(unsafe.SliceData(b))
	if uintptr(p)%uintptr(size) != 0 {
		return nil, false
	}
	return unsafe.Slice((*T)(p), len(b)/size), true
}

// gatherTyped moves out[i] = ring[idx[i]*ws] for i in [lo, hi) with
// typed loads (ws: the ring's stride in words); it reports false (moving
// nothing) when the memory or the stride is unaligned.
func gatherTyped[T word](out, ring []byte, idx []int64, r int64, lo, hi int) bool {
	var z T
	size := int64(unsafe.Sizeof(z))
	o, ok1 := words[T](out)
	rw, ok2 := words[T](ring)
	if !ok1 || !ok2 || r%size != 0 {
		return false
	}
	ws := r / size
	for i := lo; i < hi; i++ {
		o[i] = rw[idx[i]*ws]
	}
	return true
}

// ringBytes returns the bytes of column col's ring from its offset on:
// step k of the column starts at byte k*col.RingStride() of it.
func ringBytes(col *kernels.Column) []byte { return col.Ring.(*Arena).b[col.Offset:] }

// gatherChunk moves the steps idx[lo:hi] of a ring (from the column's
// offset, steps r bytes apart) to steps lo..hi of out.
func gatherChunk(out, ring []byte, s, r int64, idx []int64, lo, hi int) {
	if s >= 4 {
		moveRows(out[int64(lo)*s:], ring, idx[lo:hi], r, s)
		return
	}
	switch s {
	case 1:
		if gatherTyped[uint8](out, ring, idx, r, lo, hi) {
			return
		}
	case 4:
		if gatherTyped[uint32](out, ring, idx, r, lo, hi) {
			return
		}
	case 8:
		if gatherTyped[uint64](out, ring, idx, r, lo, hi) {
			return
		}
	}
	for i := lo; i < hi; i++ {
		ix := idx[i] * r
		copy(out[int64(i)*s:int64(i+1)*s], ring[ix:ix+s])
	}
}

// moveRows moves ring steps idx (r bytes apart, s bytes each) to the
// first len(idx) steps of out (see rowmove.Rows). The caller has checked
// that every index lies within the ring.
func moveRows(out, ring []byte, idx []int64, r, s int64) {
	if len(idx) == 0 {
		return
	}
	_ = out[int64(len(idx))*s-1] // the output run lies within out
	rowmove.Rows(unsafe.Pointer(unsafe.SliceData(out)), unsafe.Pointer(unsafe.SliceData(ring)), idx, r, s)
}

// maxPlan bounds the distinct rings a gather prefetches from with a plan
// on the stack; gathers over more rings prefetch column by column.
const maxPlan = 16

// maxPlanCols bounds the columns of a gather planned so; wider gathers
// (hundreds of fields) prefetch column by column too.
const maxPlanCols = 128

// aheadMin is the smallest step whose column a row gather moves with its
// ring's records prefetched whole a few rows ahead (rowmove.RowsAhead)
// rather than by their first and last line a chunk ahead: from a few
// lines a row, the lines between are fetched late by the hardware.
const aheadMin = 256

// aheadBytes is about how many bytes of records such a gather keeps in
// flight ahead of the row it moves, from minAhead to maxAhead records.
const (
	aheadBytes         = 8 << 10
	minAhead, maxAhead = 2, 16
)

// prefetchPlan lists, once per distinct ring arena of a gather, what to
// prefetch for a row: columns that share a ring (packed records) prefetch
// the whole record once, so the first column's miss brings the record
// and the others hit.
type prefetchPlan struct {
	n     int
	next  bool // only the columns with a NextOut
	base  [maxPlan]unsafe.Pointer
	r, sp [maxPlan]int64
	// lead[i] is the column whose row moves prefetch ring i's records
	// dist[i] rows ahead (the first of its columns with steps of aheadMin
	// bytes or more), or -1; rows leaves those rings to it.
	lead [maxPlan]int
	dist [maxPlan]int
}

// build plans the prefetches of a gather of every column; with ahead,
// each ring gets its lead column (see lead).
func (p *prefetchPlan) build(cols []kernels.Column, ahead bool) { p.buildOf(cols, false, ahead) }

// buildOf is build, of the columns with a NextOut only when next is set.
func (p *prefetchPlan) buildOf(cols []kernels.Column, next, ahead bool) {
	p.n = 0
	p.next = next
	// The rings as pointers: comparing them pairwise as interfaces was a
	// twentieth of a one-item sample.
	var ringOf [maxPlanCols]*Arena
	if len(cols) > len(ringOf) {
		p.n = -1 // prefetch column by column
		return
	}
	for c := range cols {
		ringOf[c] = cols[c].Ring.(*Arena)
	}
	in := func(col *kernels.Column) bool { return !next || col.NextOut != nil }
	for c := range cols {
		col := &cols[c]
		if !in(col) {
			continue
		}
		shared, seen := false, false
		for d := range cols {
			if d != c && ringOf[d] == ringOf[c] {
				shared = true
				seen = seen || d < c && in(&cols[d])
			}
		}
		if seen {
			continue
		}
		if p.n == maxPlan {
			p.n = -1 // too many rings: prefetch column by column
			return
		}
		ring := ringOf[c].b
		base, span := unsafe.Pointer(unsafe.SliceData(ring)), col.RingStride()
		if !shared {
			base, span = unsafe.Pointer(unsafe.SliceData(ring[col.Offset:])), col.StepBytes
		}
		p.base[p.n], p.r[p.n], p.sp[p.n] = base, col.RingStride(), span
		p.lead[p.n] = -1
		for d := c; ahead && d < len(cols); d++ { // c is the ring's first column
			if ringOf[d] == ringOf[c] && cols[d].StepBytes >= aheadMin && in(&cols[d]) {
				p.lead[p.n], p.dist[p.n] = d, min(max(int(aheadBytes/span), minAhead), maxAhead)
				break
			}
		}
		p.n++
	}
}

// leadOf returns the ring whose records column c's row moves prefetch
// (see lead), or -1.
func (p *prefetchPlan) leadOf(c int) int {
	for i := range max(p.n, 0) {
		if p.lead[i] == c {
			return i
		}
	}
	return -1
}

// start prefetches the records of the rows that the lead columns' first
// moves do not prefetch: the first dist of idx.
func (p *prefetchPlan) start(idx []int64) {
	for i := range max(p.n, 0) {
		if p.lead[i] >= 0 {
			prefetch.Records(p.base[i], idx[:min(p.dist[i], len(idx))], p.r[i], p.sp[i])
		}
	}
}

// windowMax is the longest window, in bytes from its first record's
// first prefetched byte to its last's last, whose every line the window
// gathers prefetch a chunk ahead (prefetchPlan.windows); longer windows
// would have too many misses in flight at once.
const windowMax = 4 << 10

// windows prefetches, for windows of seqLen steps whose first steps are
// idx, every line of each window where it spans at most windowMax bytes,
// and as rows does otherwise.
func (p *prefetchPlan) windows(cols []kernels.Column, idx []int64, seqLen int64) {
	if seqLen == 1 || p.n < 0 {
		p.rows(cols, idx)
		return
	}
	for i := range p.n {
		if w := (seqLen-1)*p.r[i] + p.sp[i]; w <= windowMax {
			prefetch.Records(p.base[i], idx, p.r[i], w)
		} else {
			prefetch.Rows(p.base[i], idx, p.r[i], p.sp[i])
		}
	}
}

// gatherAhead moves the steps idx of column col to the first len(idx)
// steps of out, prefetching ring i's records pf (the rows dist places
// on) as it goes (rowmove.RowsAhead).
func (p *prefetchPlan) gatherAhead(i int, col *kernels.Column, out []byte, idx, pf []int64) {
	if len(idx) == 0 {
		return
	}
	s := col.StepBytes
	_ = out[int64(len(idx))*s-1] // the output run lies within out
	rowmove.RowsAhead(unsafe.Pointer(unsafe.SliceData(out)), unsafe.Pointer(unsafe.SliceData(ringBytes(col))),
		idx, pf, col.RingStride(), s, rowmove.Ahead{Base: p.base[i], Stride: p.r[i], Span: p.sp[i]})
}

// rows prefetches ring steps idx in every column of the plan's gather.
func (p *prefetchPlan) rows(cols []kernels.Column, idx []int64) {
	if p.n < 0 {
		for c := range cols {
			if p.next && cols[c].NextOut == nil {
				continue
			}
			prefetch.Rows(unsafe.Pointer(unsafe.SliceData(ringBytes(&cols[c]))), idx, cols[c].RingStride(), cols[c].StepBytes)
		}
		return
	}
	for i := range p.n {
		if p.lead[i] < 0 {
			prefetch.Rows(p.base[i], idx, p.r[i], p.sp[i])
		}
	}
}

// gatherRows moves the rows of every column for outputs [lo, hi), a
// chunk of rows at a time (rows outer, columns inner: the columns of one
// packed record are moved while its cache lines are fresh), prefetching
// the next chunk's rows first (see gatherPrefetch).
func gatherRows(cols []kernels.Column, idx []int64, lo, hi int) { concat(cols, idx, nil, lo, hi) }

// concat is gatherRows that also moves, when next is not nil, the
// successors next of the columns with a NextOut: a chunk's successors
// right after its steps (a step's successor is usually the next slot of
// its row, in the same memory page), both prefetched a chunk ahead.
func concat(cols []kernels.Column, idx, next []int64, lo, hi int) {
	var plan, nplan prefetchPlan
	if gatherPrefetch {
		plan.build(cols, true)
		plan.start(idx[lo:hi])
		if next != nil {
			nplan.buildOf(cols, true, true)
			nplan.start(next[lo:hi])
		}
	}
	for c0 := lo; c0 < hi; c0 += prefetchChunk {
		c1 := min(c0+prefetchChunk, hi)
		if gatherPrefetch && c1 < hi {
			e := min(c1+prefetchChunk, hi)
			plan.rows(cols, idx[c1:e])
			if next != nil {
				nplan.rows(cols, next[c1:e])
			}
		}
		for c := range cols {
			col := &cols[c]
			if i := plan.leadOf(c); i >= 0 {
				d := plan.dist[i]
				plan.gatherAhead(i, col, col.Out.(*Arena).b[col.OutOff+int64(c0)*col.StepBytes:], idx[c0:c1], idx[min(c0+d, hi):min(c1+d, hi)])
				continue
			}
			gatherChunk(col.Out.(*Arena).b[col.OutOff:], ringBytes(col), col.StepBytes, col.RingStride(), idx, c0, c1)
		}
		if next == nil {
			continue
		}
		for c := range cols {
			col := &cols[c]
			if col.NextOut == nil {
				continue
			}
			if i := nplan.leadOf(c); i >= 0 {
				d := nplan.dist[i]
				nplan.gatherAhead(i, col, col.NextOut.(*Arena).b[col.NextOff+int64(c0)*col.StepBytes:], next[c0:c1], next[min(c0+d, hi):min(c1+d, hi)])
				continue
			}
			gatherChunk(col.NextOut.(*Arena).b[col.NextOff:], ringBytes(col), col.StepBytes, col.RingStride(), next, c0, c1)
		}
	}
}

// windowsTyped moves windows [lo, hi) of one column of 1-, 4- or 8-byte
// steps r bytes apart in ring, whose first steps are ring steps
// base[b-lo]; it reports false when the memory or stride is unaligned.
func windowsTyped[T word](out, ring, pad []byte, wins []kernels.Window, base []int64, r, seqLen, capacity int64, lo, hi int) bool {
	var z T
	size := int64(unsafe.Sizeof(z))
	o, ok1 := words[T](out)
	rw, ok2 := words[T](ring)
	if !ok1 || !ok2 || r%size != 0 {
		return false
	}
	ws := r / size
	var p T
	if pad != nil {
		copy(unsafe.Slice((*byte)(unsafe.Pointer(&p)), unsafe.Sizeof(p)), pad) // pad may be unaligned
	}
	if seqLen == 1 {
		// One step per window: the ring's step, or the pad step of an
		// empty window (Len 0).
		for b := lo; b < hi; b++ {
			if wins[b].Len == 0 {
				o[b] = p
				continue
			}
			o[b] = rw[base[b-lo]*ws]
		}
		return true
	}
	for b := lo; b < hi; b++ {
		w := wins[b]
		dst := o[int64(b)*seqLen : int64(b+1)*seqLen]
		row := w.Row * capacity
		slot := base[b-lo] - row
		for t := range w.Len {
			dst[t] = rw[(row+slot)*ws]
			if slot++; slot == capacity {
				slot = 0
			}
		}
		for t := w.Len; t < seqLen; t++ {
			dst[t] = p
		}
	}
	return true
}

// windowsColumn moves windows [lo, hi) of one column of s-byte steps r
// bytes apart in ring (from the column's offset), whose first steps are
// ring steps base[b-lo]. Steps move by copy: memmove's overlapping loads
// beat inline 16-byte words here.
func windowsColumn(out, ring, pad []byte, s, r int64, wins []kernels.Window, base []int64, seqLen, capacity int64, lo, hi int) {
	switch s {
	case 1:
		if windowsTyped[uint8](out, ring, pad, wins, base, r, seqLen, capacity, lo, hi) {
			return
		}
	case 4:
		if windowsTyped[uint32](out, ring, pad, wins, base, r, seqLen, capacity, lo, hi) {
			return
		}
	case 8:
		if windowsTyped[uint64](out, ring, pad, wins, base, r, seqLen, capacity, lo, hi) {
			return
		}
	}
	for b := lo; b < hi; b++ {
		w := wins[b]
		dst := out[int64(b)*seqLen*s : int64(b+1)*seqLen*s]
		first := base[b-lo]
		row := w.Row * capacity
		if r == s {
			n := min(w.Len, row+capacity-first) // steps before the wrap
			copy(dst[:n*s], ring[first*s:(first+n)*s])
			copy(dst[n*s:w.Len*s], ring[row*s:(row+w.Len-n)*s])
		} else {
			slot := first - row
			for t := range w.Len {
				ix := (row + slot) * r
				copy(dst[t*s:(t+1)*s], ring[ix:ix+s])
				if slot++; slot == capacity {
					slot = 0
				}
			}
		}
		rest := dst[w.Len*s:]
		if pad == nil {
			clear(rest)
			continue
		}
		for len(rest) > 0 {
			rest = rest[copy(rest, pad):]
		}
	}
}

// gatherWindows moves windows [lo, hi) of every column, and their mask,
// a chunk of windows at a time: the ring steps of the next chunk are
// prefetched in every column before the current chunk is moved (see
// gatherPrefetch).
func gatherWindows(cols []kernels.Column, wins []kernels.Window, seqLen, capacity int64, mask kernels.Arena, maskOff int64, lo, hi int) {
	chunk := windowChunk
	for c := range cols {
		if cols[c].StepBytes >= aheadMin {
			chunk = prefetchChunk
			break
		}
	}
	var bases [2][windowChunk]int64
	firsts := func(buf *[windowChunk]int64, a, b int) []int64 {
		for i := a; i < b; i++ {
			s := wins[i].Start
			if s >= capacity { // samplers may hand over slots: no division
				s %= capacity
			}
			buf[i-a] = wins[i].Row*capacity + s
		}
		return buf[:b-a]
	}
	var plan prefetchPlan
	if gatherPrefetch {
		plan.build(cols, seqLen == 1)
	}
	// rows: the columns of one-step windows as rowmove columns, moved by
	// one call per chunk rather than a call per column and chunk (nil when
	// a step size does not fit rowmove).
	var rowCols [maxPlan]rowmove.Col
	var rows []rowmove.Col
	if seqLen <= maxExpand && len(cols) <= maxPlan {
		rows = rowCols[:len(cols)]
		for c := range cols {
			col := &cols[c]
			if !rowmove.Fits(col.StepBytes) {
				rows = nil
				break
			}
			rows[c] = rowmove.Col{
				Dst:    unsafe.Pointer(unsafe.SliceData(col.Out.(*Arena).b[col.OutOff:])),
				Src:    unsafe.Pointer(unsafe.SliceData(ringBytes(col))),
				Stride: col.RingStride(), Size: col.StepBytes,
			}
		}
	}
	var steps [windowChunk * maxExpand]int64
	var pf [windowChunk + maxAhead]int64
	cur := firsts(&bases[0], lo, min(lo+chunk, hi))
	plan.start(cur)
	if gatherPrefetch {
		// The first chunk's, one-step windows too: their misses overlap
		// before the first moves wait on them.
		plan.windows(cols, cur, seqLen)
	}
	for c0 := lo; c0 < hi; c0 += chunk {
		c1 := min(c0+chunk, hi)
		var next []int64
		if c1 < hi {
			next = firsts(&bases[(c0-lo)/chunk%2^1], c1, min(c1+chunk, hi))
			if gatherPrefetch {
				plan.windows(cols, next, seqLen)
			}
		}
		if seqLen == 1 && full(wins[c0:c1]) {
			// One real step per window: a row gather of every column
			// (rowmove.Rows), no pad or wrap work per row.
			if rows != nil {
				rowmove.Cols(rows, cur, int64(c0))
			} else {
				for c := range cols {
					col := &cols[c]
					out := col.Out.(*Arena).b[col.OutOff+int64(c0)*col.StepBytes:]
					if i := plan.leadOf(c); i >= 0 {
						// The records dist rows on: the rest of this chunk's
						// rows, then the next chunk's first.
						d := plan.dist[i]
						ahead := append(append(pf[:0], cur[min(d, len(cur)):]...), next[:min(d, len(next))]...)
						plan.gatherAhead(i, col, out, cur, ahead)
						continue
					}
					moveRows(out, ringBytes(col), cur, col.RingStride(), col.StepBytes)
				}
			}
			cur = next
			continue
		}
		if rows != nil && seqLen > 1 && fullLen(wins[c0:c1], seqLen) {
			// Windows of seqLen real steps: the row gather of their steps
			// in output order (a window's steps are consecutive ring slots
			// of its row, wrapping at the row's end), one call for every
			// column, instead of a copy call per step and column.
			rowmove.Cols(rows, windowSteps(&steps, wins[c0:c1], cur, seqLen, capacity), int64(c0)*seqLen)
			cur = next
			continue
		}
		for c := range cols {
			col := &cols[c]
			windowsColumn(col.Out.(*Arena).b[col.OutOff:], ringBytes(col), col.Pad, col.StepBytes, col.RingStride(),
				wins, cur, seqLen, capacity, c0, c1)
		}
		cur = next
	}
	if mask == nil {
		return
	}
	m := mask.(*Arena).b[maskOff:]
	if seqLen == 1 {
		// Len is 0 or 1 (checked by GatherWindows).
		for b := lo; b < hi; b++ {
			m[b] = byte(wins[b].Len)
		}
		return
	}
	for b := lo; b < hi; b++ {
		row := m[int64(b)*seqLen : int64(b+1)*seqLen]
		l := wins[b].Len
		for t := range row {
			row[t] = 0
			if int64(t) < l {
				row[t] = 1
			}
		}
	}
}

// maxExpand is the longest window gatherWindows moves as a row gather of
// its steps (see windowSteps); longer windows move column by column.
const maxExpand = 16

// windowSteps writes to buf, in output order, the ring step of every step
// of the full windows wins (of seqLen steps each), whose first steps are
// ring steps first, and returns them.
func windowSteps(buf *[windowChunk * maxExpand]int64, wins []kernels.Window, first []int64, seqLen, capacity int64) []int64 {
	k := 0
	for i, f := range first {
		row := wins[i].Row * capacity
		end := row + capacity
		for range seqLen {
			buf[k] = f
			k++
			if f++; f == end {
				f = row
			}
		}
	}
	return buf[:k]
}

// fullLen reports whether every window holds seqLen real steps.
func fullLen(wins []kernels.Window, seqLen int64) bool {
	for i := range wins {
		if wins[i].Len != seqLen {
			return false
		}
	}
	return true
}

// full reports whether every window holds one real step.
func full(wins []kernels.Window) bool {
	for i := range wins {
		if wins[i].Len != 1 {
			return false
		}
	}
	return true
}

// A job is one data movement split over the fanout workers. Jobs are
// recycled through jobs, so a split movement allocates nothing.
type job struct {
	kind     int
	cols     []kernels.Column
	idx      []int64
	next     []int64
	wins     []kernels.Window
	seqLen   int64
	capacity int64
	mask     kernels.Arena
	maskOff  int64
}

const (
	jobRows = iota
	jobConcat
	jobWindows
)

// Run moves items lo..hi-1 (fanout.Job).
func (j *job) Run(lo, hi int) {
	switch j.kind {
	case jobRows:
		gatherRows(j.cols, j.idx, lo, hi)
	case jobConcat:
		concat(j.cols, j.idx, j.next, lo, hi)
	case jobWindows:
		gatherWindows(j.cols, j.wins, j.seqLen, j.capacity, j.mask, j.maskOff, lo, hi)
	}
}

// jobs is a free list of jobs, not a sync.Pool: a pool is emptied by
// every garbage collection, and a long sample (one with GCs between calls)
// would then allocate jobs again. The list holds at most as many jobs as
// calls ever ran at once.
var jobs struct {
	sync.Mutex
	free []*job
}

// split runs j over [0, n) in up to b.workers equal parts (fanout.Run:
// the calling goroutine takes a part a worker has not claimed yet), and
// waits; it then clears j and returns it to the free list.
func (b *Backend) split(j *job, n int) {
	w := max(1, min(b.workers, n))
	fanout.Run(j, n, (n+w-1)/w, w)
	// Drop the references the job held.
	j.cols, j.idx, j.next, j.wins, j.mask = nil, nil, nil, nil, nil
	jobs.Lock()
	jobs.free = append(jobs.free, j)
	jobs.Unlock()
}

func newJob(kind int) *job {
	var j *job
	jobs.Lock()
	if n := len(jobs.free); n > 0 {
		j, jobs.free = jobs.free[n-1], jobs.free[:n-1]
	}
	jobs.Unlock()
	if j == nil {
		j = new(job)
	}
	j.kind = kind
	return j
}
