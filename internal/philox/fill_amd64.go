//go:build amd64 && !purego

package philox

import (
	"unsafe"

	"github.com/trajring/trajring/internal/impl"
	"golang.org/x/sys/cpu"
)

// The vector loops this CPU can run.
var (
	hasAVX2   = cpu.X86.HasAVX2
	hasAVX512 = hasAVX2 && cpu.X86.HasAVX512F && cpu.X86.HasAVX512VL
)

// useAVX2 and useAVX512 select Fill's vector loops, the widest the CPU
// has unless a test selects others (internal/impl: "avx2" is fill16,
// "avx512" fill64 then fill16).
var useAVX2, useAVX512 bool

func init() {
	impl.Register("philox", "avx2", hasAVX2, func(on bool) { useAVX2 = on })
	impl.Register("philox", "avx512", hasAVX512, func(on bool) { useAVX512 = on })
}

// fill16 computes n groups of 16 draws into dst (16*n uint64s): group g
// holds the draws of blocks x+8g .. x+8g+7 of counter {., stream, c0,
// c1}, two a block, in Fill's order; keys[2r], keys[2r+1] are the key
// words of round r. Eight blocks are computed at once, four per 256-bit
// register set (VPMULUDQ multiplies four 32-bit words into 64-bit lanes).
// BenchmarkFill shows its win over Fill's Go loop (avx2 against go).
//
//go:noescape
func fill16(dst unsafe.Pointer, n int, x, stream, c0, c1 uint32, keys *[20]uint64)

// fill64 is fill16 for n groups of 64 draws (blocks x+32g .. x+32g+31),
// 32 blocks at once: four 512-bit register sets of eight blocks, a
// round's two XORs as one VPTERNLOGQ (AVX-512F), the draws interleaved
// by VPERMI2Q. BenchmarkFill shows its win over fill16 (avx512 against
// avx2).
//
//go:noescape
func fill64(dst unsafe.Pointer, n int, x, stream, c0, c1 uint32, keys *[20]uint64)
