package tensorbuf

// span is the byte range [off, off+n) of an arena (or, at stride 1, of
// slots or of the metadata mirror).
type span struct{ off, n int64 }

// storedSlots returns the slots that hold stored steps, as ranges of slot
// indices in row order: row r's steps fill its slots from r*capacity on,
// one per step, until the row wraps, so the slots of its
// min(cursor, capacity) stored steps are the first ones of the row.
// Ranges that touch (full rows) are merged, so that a full buffer is one
// range.
func storedSlots(cursors []int64, capacity int64) []span {
	var out []span
	for r, c := range cursors {
		n := min(c, capacity)
		if n <= 0 {
			continue
		}
		off := int64(r) * capacity
		if k := len(out); k > 0 && out[k-1].off+out[k-1].n == off {
			out[k-1].n += n
			continue
		}
		out = append(out, span{off, n})
	}
	return out
}

// scaleSpans returns slot ranges as byte ranges of an arena of the given
// stride.
func scaleSpans(slots []span, stride int64) []span {
	out := make([]span, len(slots))
	for i, s := range slots {
		out[i] = span{s.off * stride, s.n * stride}
	}
	return out
}

// spansLen is the bytes the spans cover.
func spansLen(sp []span) int64 {
	var n int64
	for _, s := range sp {
		n += s.n
	}
	return n
}

// spanWalk maps a stream of bytes, the spans concatenated in order, to
// the arena ranges they come from; not safe for concurrent use.
type spanWalk struct {
	sp   []span
	i    int
	used int64 // bytes of sp[i] already walked
}

// next walks the next n bytes of the stream (n at most what is left)
// and calls fn with each piece: its offset in the arena and the range
// [lo, hi) it takes within those n bytes. It stops at fn's first error.
func (w *spanWalk) next(n int64, fn func(off, lo, hi int64) error) error {
	for lo := int64(0); lo < n; {
		for w.used == w.sp[w.i].n {
			w.i, w.used = w.i+1, 0
		}
		s := w.sp[w.i]
		k := min(n-lo, s.n-w.used)
		if err := fn(s.off+w.used, lo, lo+k); err != nil {
			return err
		}
		w.used += k
		lo += k
	}
	return nil
}
