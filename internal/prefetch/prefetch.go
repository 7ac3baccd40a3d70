// Package prefetch asks the processor to start loading memory that a loop
// will read a little later, so that the cache misses of independent
// random reads overlap (software prefetch). On amd64 it issues PREFETCHT0
// from assembly; elsewhere, and with the purego build tag, its functions
// do nothing. A prefetch never faults, whatever the address, and changes
// no memory: the functions are safe for concurrent use.
package prefetch

import "unsafe"

// Enabled reports whether the functions issue prefetches (false where
// they are no-ops).
const Enabled = enabled

// Rows prefetches, for each i, the first and the last byte of the row
// base + idx[i]*stride .. + span-1 (span >= 1): both cache lines of a row
// that straddles a line, the ends of a longer one (for records of more
// than a few lines, Span or Records fetch every line).
func Rows(base unsafe.Pointer, idx []int64, stride, span int64) {
	if len(idx) == 0 || span < 1 {
		return
	}
	rows(base, idx, stride, span)
}

// Rows32 prefetches base + idx[i]*stride for each i (one line each).
func Rows32(base unsafe.Pointer, idx []int32, stride int64) {
	if len(idx) == 0 {
		return
	}
	rows32(base, idx, stride)
}

// Span prefetches every cache line of the n bytes from p (nothing for
// n < 1): a record whose every line is read soon, where the first line's
// miss would start the hardware's stream prefetcher too late to help.
func Span(p unsafe.Pointer, n int64) {
	if n < 1 {
		return
	}
	span(p, n)
}

// Records prefetches, for each i, every cache line of the record base +
// idx[i]*stride .. + span-1 (see Span).
func Records(base unsafe.Pointer, idx []int64, stride, span int64) {
	for _, ix := range idx {
		Span(unsafe.Add(base, ix*stride), span)
	}
}
