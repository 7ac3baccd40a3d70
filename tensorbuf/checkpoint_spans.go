package tensorbuf

import "github.com/trajring/trajring/tensorbuf/internal/ckptio"

// storedSlots returns the slots that hold stored steps, as ranges of slot
// indices in row order: row r's steps fill its slots from r*capacity on,
// one per step, until the row wraps, so the slots of its
// min(cursor, capacity) stored steps are the first ones of the row.
// Ranges that touch (full rows) are merged, so that a full buffer is one
// range.
func storedSlots(cursors []int64, capacity int64) []ckptio.Span {
	var out []ckptio.Span
	for r, c := range cursors {
		n := min(c, capacity)
		if n <= 0 {
			continue
		}
		off := int64(r) * capacity
		if k := len(out); k > 0 && out[k-1].Off+out[k-1].N == off {
			out[k-1].N += n
			continue
		}
		out = append(out, ckptio.Span{Off: off, N: n})
	}
	return out
}
