//go:build amd64 && !purego

package philox

import (
	"unsafe"

	"golang.org/x/sys/cpu"
)

// hasAVX2 selects fill16 (the vector loop) in Fill.
var hasAVX2 = cpu.X86.HasAVX2

// setAVX2 switches the vector loop (tests).
func setAVX2(on bool) { hasAVX2 = on }

// fill16 computes n groups of 16 draws into dst (16*n uint64s): group g
// holds the draws of blocks x+8g .. x+8g+7 of counter {., stream, c0,
// c1}, two a block, in Fill's order; keys[2r], keys[2r+1] are the key
// words of round r. Eight blocks are computed at once, four per 256-bit
// register set (VPMULUDQ multiplies four 32-bit words into 64-bit lanes).
//
//go:noescape
func fill16(dst unsafe.Pointer, n int, x, stream, c0, c1 uint32, keys *[20]uint64)
