package ckptio

// Span is the byte range [Off, Off+N) of a source or destination (an
// arena, or at stride 1 its slots or the metadata mirror). A section
// that holds spans holds their bytes concatenated in order.
type Span struct{ Off, N int64 }

// ScaleSpans returns slot ranges as byte ranges of an arena of the given
// stride.
func ScaleSpans(slots []Span, stride int64) []Span {
	out := make([]Span, len(slots))
	for i, s := range slots {
		out[i] = Span{s.Off * stride, s.N * stride}
	}
	return out
}

// SpansLen is the bytes the spans cover.
func SpansLen(sp []Span) int64 {
	var n int64
	for _, s := range sp {
		n += s.N
	}
	return n
}

// SpanWalk maps a stream of bytes, its spans concatenated in order, to
// the ranges they come from; not safe for concurrent use.
type SpanWalk struct {
	sp   []Span
	i    int
	used int64 // bytes of sp[i] already walked
}

// NewSpanWalk returns a walk over sp from its first byte.
func NewSpanWalk(sp []Span) SpanWalk { return SpanWalk{sp: sp} }

// Next walks the next n bytes of the stream (n at most what is left)
// and calls fn with each piece: its offset in the spans' space and the
// range [lo, hi) it takes within those n bytes. It stops at fn's first
// error.
func (w *SpanWalk) Next(n int64, fn func(off, lo, hi int64) error) error {
	for lo := int64(0); lo < n; {
		for w.used == w.sp[w.i].N {
			w.i, w.used = w.i+1, 0
		}
		s := w.sp[w.i]
		k := min(n-lo, s.N-w.used)
		if err := fn(s.Off+w.used, lo, lo+k); err != nil {
			return err
		}
		w.used += k
		lo += k
	}
	return nil
}
