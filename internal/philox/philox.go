// Package philox is the counter-based generator behind every sampling
// draw of trajring: Philox4x32-10 (Salmon, Moraes, Dror and Shaw,
// "Parallel random numbers: as easy as 1, 2, 3", SC 2011), the generator
// of cuRAND's Philox and of JAX.
//
// It is the Go twin of kernels/host/philox.h, which kernels compile for
// the device and the stand-in for the host: a draw is a pure function of
// (seed, stream, call, k), so iteration k of a host loop and thread k of a
// kernel draw the same value, and a seeded sample selects the same items
// on the cpu and gpu backends. Package kernels/host's tests check the two
// bodies against each other bit for bit, and this package's against the
// published known-answer vectors of Random123.
//
// Every function is pure and safe for concurrent use.
package philox

import (
	"fmt"
	"math/bits"
	"unsafe"

	"github.com/trajring/trajring/internal/impl"
)

// The multipliers and Weyl key increments of Philox4x32.
const (
	m0 = 0xD2511F53
	m1 = 0xCD9E8D57
	w0 = 0x9E3779B9
	w1 = 0xBB67AE85
)

// The loops Fill can run (tests switch between them with setImpl).
const (
	implGo = iota
	implAVX2
	implAVX512
)

// setImpl makes Fill run impl's loops (implGo: none; implAVX2: fill16;
// implAVX512: fill64, then fill16) through internal/impl and reports
// whether it could; where it cannot, Fill is left as it was.
func setImpl(im int) bool {
	return impl.Select("philox", [...]string{implGo: "", implAVX2: "avx2", implAVX512: "avx512"}[im])
}

// fillBlocks is the vector loops' work in Go: the 2*blocks draws of
// blocks x, x+1, ... of counter {., stream, c0, c1} under the key whose
// first round's words are keys[0] and keys[1], two a block, into dst, in
// Fill's order. It is fill16 and fill64 where there is no assembly.
func fillBlocks(dst unsafe.Pointer, blocks int, x, stream, c0, c1 uint32, keys *[20]uint64) {
	d := unsafe.Slice((*uint64)(dst), 2*blocks)
	k0, k1 := uint32(keys[0]), uint32(keys[1])
	for b := range blocks {
		a0, a1, a2, a3 := block(x+uint32(b), stream, c0, c1, k0, k1)
		d[2*b], d[2*b+1] = uint64(a0)|uint64(a1)<<32, uint64(a2)|uint64(a3)<<32
	}
}

// Block returns Philox4x32-10 of counter c under key k.
func Block(c [4]uint32, k [2]uint32) [4]uint32 {
	c0, c1, c2, c3 := block(c[0], c[1], c[2], c[3], k[0], k[1])
	return [4]uint32{c0, c1, c2, c3}
}

// block is Block on scalars, the form the compiler keeps in registers
// (rounds over arrays are several times slower). Each round:
// (hi0, lo0) = m0*c0, (hi1, lo1) = m1*c2, c = {hi1^c1^k0, lo1,
// hi0^c3^k1, lo0}; then the key takes its Weyl step.
func block(c0, c1, c2, c3, k0, k1 uint32) (uint32, uint32, uint32, uint32) {
	for range 10 {
		p0 := uint64(m0) * uint64(c0)
		p1 := uint64(m1) * uint64(c2)
		c0, c1, c2, c3 = uint32(p1>>32)^c1^k0, uint32(p1), uint32(p0>>32)^c3^k1, uint32(p0)
		k0 += w0
		k1 += w1
	}
	return c0, c1, c2, c3
}

// Draw returns draw k of call call of stream stream under seed. One
// block gives two draws: with c = Block({k/2, stream, call, call>>32},
// {seed, seed>>32}), an even k takes c[0] | c[1]<<32 and an odd k
// c[2] | c[3]<<32.
func Draw(seed uint64, stream uint32, call uint64, k uint32) uint64 {
	c0, c1, c2, c3 := block(k>>1, stream, uint32(call), uint32(call>>32), uint32(seed), uint32(seed>>32))
	if k&1 != 0 {
		return uint64(c2) | uint64(c3)<<32
	}
	return uint64(c0) | uint64(c1)<<32
}

// Fill sets dst[i] to Draw(seed, stream, call, k+i) for every i, two
// draws per block and two blocks at a time (the rounds of one block form
// a chain of multiplies; two chains keep the multiplier busy). With AVX2
// (amd64), runs of 16 draws take eight blocks at once in vector registers
// (fill16), and with AVX-512 runs of 64 draws take 32 blocks (fill64);
// BenchmarkFill compares the loops. k+len(dst) must not pass 2^32: past
// it the counters would wrap and repeat earlier draws, so Fill panics
// (every caller's sizes are bounded far below it).
func Fill(dst []uint64, seed uint64, stream uint32, call uint64, k uint32) {
	if uint64(k)+uint64(len(dst)) > 1<<32 {
		panic(fmt.Sprintf("philox: internal error: Fill of %d draws from k=%d passes 2^32", len(dst), k))
	}
	s0, s1, c0, c1 := uint32(seed), uint32(seed>>32), uint32(call), uint32(call>>32)
	i := 0
	if k&1 != 0 && len(dst) > 0 {
		dst[0] = Draw(seed, stream, call, k)
		i, k = 1, k+1
	}
	if useAVX2 && len(dst)-i >= 16 {
		var keys [20]uint64
		k0, k1 := s0, s1
		for r := range 10 {
			keys[2*r], keys[2*r+1] = uint64(k0), uint64(k1)
			k0 += w0
			k1 += w1
		}
		if g := (len(dst) - i) / 64; useAVX512 && g > 0 {
			fill64(unsafe.Pointer(&dst[i]), g, k>>1, stream, c0, c1, &keys)
			i, k = i+64*g, k+64*uint32(g)
		}
		if g := (len(dst) - i) / 16; g > 0 {
			fill16(unsafe.Pointer(&dst[i]), g, k>>1, stream, c0, c1, &keys)
			i, k = i+16*g, k+16*uint32(g)
		}
	}
	for ; i+4 <= len(dst); i, k = i+4, k+4 {
		a0, a1, a2, a3, b0, b1, b2, b3 := block2(k>>1, k>>1+1, stream, c0, c1, s0, s1)
		dst[i] = uint64(a0) | uint64(a1)<<32
		dst[i+1] = uint64(a2) | uint64(a3)<<32
		dst[i+2] = uint64(b0) | uint64(b1)<<32
		dst[i+3] = uint64(b2) | uint64(b3)<<32
	}
	for ; i < len(dst); i, k = i+1, k+1 {
		dst[i] = Draw(seed, stream, call, k)
	}
}

// block2 computes the blocks of counters {x, c1, c2, c3} and {y, c1, c2,
// c3} under one key, interleaved.
func block2(x, y, c1, c2, c3, k0, k1 uint32) (a0, a1, a2, a3, b0, b1, b2, b3 uint32) {
	a0, a1, a2, a3 = x, c1, c2, c3
	b0, b1, b2, b3 = y, c1, c2, c3
	for range 10 {
		p0 := uint64(m0) * uint64(a0)
		p1 := uint64(m1) * uint64(a2)
		q0 := uint64(m0) * uint64(b0)
		q1 := uint64(m1) * uint64(b2)
		a0, a1, a2, a3 = uint32(p1>>32)^a1^k0, uint32(p1), uint32(p0>>32)^a3^k1, uint32(p0)
		b0, b1, b2, b3 = uint32(q1>>32)^b1^k0, uint32(q1), uint32(q0>>32)^b3^k1, uint32(q0)
		k0 += w0
		k1 += w1
	}
	return
}

// Index maps a draw to [0, n): the high 64 bits of x*n (Lemire's
// multiply-shift, without rejection: the bias is below n/2^64).
func Index(x, n uint64) uint64 {
	hi, _ := bits.Mul64(x, n)
	return hi
}

// Float64 maps a draw to a float64 in [0, 1) with 53 random bits.
func Float64(x uint64) float64 { return float64(x>>11) * 0x1p-53 }
