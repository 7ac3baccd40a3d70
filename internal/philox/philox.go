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

import "math/bits"

// The multipliers and Weyl key increments of Philox4x32.
const (
	m0 = 0xD2511F53
	m1 = 0xCD9E8D57
	w0 = 0x9E3779B9
	w1 = 0xBB67AE85
)

// Block returns Philox4x32-10 of counter c under key k.
func Block(c [4]uint32, k [2]uint32) [4]uint32 {
	for range 10 {
		h0, l0 := bits.Mul32(m0, c[0])
		h1, l1 := bits.Mul32(m1, c[2])
		c = [4]uint32{h1 ^ c[1] ^ k[0], l1, h0 ^ c[3] ^ k[1], l0}
		k[0] += w0
		k[1] += w1
	}
	return c
}

// Draw returns draw k of call call of stream stream under seed: the
// first two words of Block({k, stream, call, call>>32}, {seed,
// seed>>32}), word 0 low.
func Draw(seed uint64, stream uint32, call uint64, k uint32) uint64 {
	c := Block([4]uint32{k, stream, uint32(call), uint32(call >> 32)}, [2]uint32{uint32(seed), uint32(seed >> 32)})
	return uint64(c[0]) | uint64(c[1])<<32
}

// Index maps a draw to [0, n): the high 64 bits of x*n (Lemire's
// multiply-shift, without rejection: the bias is below n/2^64).
func Index(x, n uint64) uint64 {
	hi, _ := bits.Mul64(x, n)
	return hi
}

// Float64 maps a draw to a float64 in [0, 1) with 53 random bits.
func Float64(x uint64) float64 { return float64(x>>11) * 0x1p-53 }
