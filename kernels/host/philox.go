//go:build cgo

package host

/*
#cgo CFLAGS: -O2
#include "philox.h"

static void tr_philox_block(tr_u32 *c, tr_u32 k0, tr_u32 k1) { tr_philox4x32_10(c, k0, k1); }
*/
import "C"

// PhiloxBlock returns Philox4x32-10 of counter c under key k, computed by
// the C body of philox.h that kernels compile (tr_philox4x32_10).
func PhiloxBlock(c [4]uint32, k [2]uint32) [4]uint32 {
	cc := [4]C.tr_u32{C.tr_u32(c[0]), C.tr_u32(c[1]), C.tr_u32(c[2]), C.tr_u32(c[3])}
	C.tr_philox_block(&cc[0], C.tr_u32(k[0]), C.tr_u32(k[1]))
	return [4]uint32{uint32(cc[0]), uint32(cc[1]), uint32(cc[2]), uint32(cc[3])}
}

// PhiloxDraw returns philox.h's tr_draw(seed, stream, call, k).
func PhiloxDraw(seed uint64, stream uint32, call uint64, k uint32) uint64 {
	return uint64(C.tr_draw(C.tr_u64(seed), C.tr_u32(stream), C.tr_u64(call), C.tr_u32(k)))
}

// PhiloxIndex returns philox.h's tr_draw_index(x, n).
func PhiloxIndex(x, n uint64) uint64 { return uint64(C.tr_draw_index(C.tr_u64(x), C.tr_u64(n))) }

// PhiloxFloat returns philox.h's tr_draw_float(x).
func PhiloxFloat(x uint64) float64 { return float64(C.tr_draw_float(C.tr_u64(x))) }
