package prefetch

import (
	"testing"
	"unsafe"
)

// TestRowsChangesNothing prefetches rows inside and far outside a slice
// (a prefetch never faults) and checks the memory is unchanged.
func TestRowsChangesNothing(t *testing.T) {
	b := make([]byte, 4096)
	for i := range b {
		b[i] = byte(i)
	}
	base := unsafe.Pointer(&b[0])
	Rows(base, []int64{0, 3, 63, 1 << 40, -5}, 64, 64)
	Rows(base, nil, 64, 64)
	Rows(base, []int64{1}, 64, 0)
	Rows32(base, []int32{0, 7, 1 << 30, -1}, 512)
	Rows32(base, nil, 512)
	for i := range b {
		if b[i] != byte(i) {
			t.Fatalf("byte %d changed", i)
		}
	}
}
