package cpu

import (
	"fmt"
	"syscall"
)

// mapMin is the smallest arena mapped on its own pages; smaller ones come
// from the Go heap.
const mapMin = 1 << 20

const madvHugepage = 14 // MADV_HUGEPAGE

func alloc(n int64) (*Arena, error) {
	if n < mapMin {
		return &Arena{b: make([]byte, n)}, nil
	}
	b, err := syscall.Mmap(-1, 0, int(n), syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_PRIVATE|syscall.MAP_ANON)
	if err != nil {
		return nil, fmt.Errorf("cpu: mapping %d bytes: %w", n, err)
	}
	_ = syscall.Madvise(b, madvHugepage) // a hint: fine to be refused
	return &Arena{b: b, mapped: true}, nil
}

func free(a *Arena) error {
	b, mapped := a.b, a.mapped
	a.b, a.mapped = nil, false
	if mapped {
		return syscall.Munmap(b)
	}
	return nil
}
