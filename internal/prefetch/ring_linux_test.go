package prefetch

import (
	"syscall"
	"testing"
)

// mapRing maps n bytes for a benchmark's ring with transparent huge pages
// asked for, as the cpu backend maps its arenas, and unmaps them when b
// ends.
func mapRing(b *testing.B, n int) []byte {
	m, err := syscall.Mmap(-1, 0, n, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_PRIVATE|syscall.MAP_ANON)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = syscall.Munmap(m) })
	_ = syscall.Madvise(m, 14) // MADV_HUGEPAGE, a hint
	return m
}
