package philox

import (
	"testing"
	"unsafe"
)

// TestFillBlocks checks the Go form of the vector loops (fill16 and
// fill64 where there is no assembly) against Draw, at even and odd
// block offsets and a call past 2^32.
func TestFillBlocks(t *testing.T) {
	seed, stream, call := uint64(0x1234_5678_9abc_def0), uint32(3), uint64(1<<32+7)
	var keys [20]uint64
	keys[0], keys[1] = uint64(uint32(seed)), uint64(uint32(seed>>32))
	for _, tc := range []struct {
		x      uint32
		blocks int
	}{{0, 8}, {5, 32}, {1<<31 - 3, 3}} {
		dst := make([]uint64, 2*tc.blocks)
		fillBlocks(unsafe.Pointer(&dst[0]), tc.blocks, tc.x, stream, uint32(call), uint32(call>>32), &keys)
		for i, v := range dst {
			if want := Draw(seed, stream, call, 2*tc.x+uint32(i)); v != want {
				t.Fatalf("block %d, draw %d: %#x, want %#x", tc.x, i, v, want)
			}
		}
	}
}
