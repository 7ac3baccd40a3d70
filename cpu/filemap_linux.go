package cpu

import (
	"fmt"
	"os"
	"syscall"
	"unsafe"
)

const (
	madvRandom   = 1  // MADV_RANDOM
	madvHugePage = 14 // MADV_HUGEPAGE
	msSync       = 4  // MS_SYNC
)

// MapFile returns an arena of n bytes that is a shared mapping of f from
// byte offset off (a multiple of the page size): writes to the arena
// reach the file's pages in the page cache, where they survive the
// process, and Flush writes them to disk. The advice, given before the
// first touch, picks the page-cache folios the mapping gets (see
// PageAdvice). The file must be at least off+n bytes long, with its blocks
// allocated (fallocate), or a write to a hole on a full disk kills the
// process with SIGBUS.
//
// The arena is freed with Backend.Free like any other (munmap; the file
// stays). It is safe for concurrent use as other arenas are.
func MapFile(f *os.File, off, n int64, advice PageAdvice) (*Arena, error) {
	if n <= 0 || off < 0 || off%int64(os.Getpagesize()) != 0 {
		return nil, fmt.Errorf("%w: mapping %d bytes at %d", ErrBounds, n, off)
	}
	b, err := syscall.Mmap(int(f.Fd()), off, int(n), syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("cpu: mapping %d bytes of %s: %w", n, f.Name(), err)
	}
	switch advice { // hints: fine to be refused
	case SmallPages:
		_ = syscall.Madvise(b, madvRandom)
	case HugePages:
		_ = syscall.Madvise(b, madvHugePage)
	}
	liveBytes.Add(n)
	return &Arena{b: b, mapped: true}, nil
}

// Flush writes the arena's dirty pages to its file and waits for them
// (msync MS_SYNC), costing the dirty pages rather than the arena's size.
// An arena not from MapFile has nothing to flush. It is safe for
// concurrent use with writes to the arena (pages written meanwhile may or
// may not be flushed).
func (a *Arena) Flush() error {
	if !a.mapped || len(a.b) == 0 {
		return nil
	}
	return Msync(a.b)
}

// Msync flushes a shared file mapping's dirty pages in b to disk and
// waits for them (msync MS_SYNC). Safe for concurrent use.
func Msync(b []byte) error {
	if len(b) == 0 {
		return nil
	}
	if err := msync(b, msSync); err != nil {
		return fmt.Errorf("cpu: msync: %w", err)
	}
	return nil
}

// Retire replaces a MapFile arena's mapping, in place, by read-only zero
// pages that hold no memory and no reference to the file, and forgets the
// arena (it is not to be freed afterwards). It is for memory that other
// code may still read after its owner has closed: such reads see zeros
// rather than faulting on an unmapped address; the address range (not
// memory) stays reserved until the process ends. Not safe for use
// concurrent with writes to the arena.
func (a *Arena) Retire() error {
	if !a.mapped || len(a.b) == 0 {
		return nil
	}
	_, _, e := syscall.Syscall6(syscall.SYS_MMAP, uintptr(unsafe.Pointer(&a.b[0])), uintptr(len(a.b)),
		syscall.PROT_READ, syscall.MAP_PRIVATE|syscall.MAP_ANON|syscall.MAP_FIXED, ^uintptr(0), 0)
	if e != 0 {
		return fmt.Errorf("cpu: retiring a mapping: %w", e)
	}
	liveBytes.Add(-int64(len(a.b)))
	a.mapped = false
	return nil
}

// Resident returns the bytes of the arena's pages in memory (mincore),
// for file mappings the part of the file in the page cache and mapped.
// Safe for concurrent use.
func (a *Arena) Resident() (int64, error) {
	if len(a.b) == 0 {
		return 0, nil
	}
	ps := os.Getpagesize()
	const window = 1 << 30 // pages checked per call: a 256 KiB vector
	vec := make([]byte, window/ps)
	var n int64
	for off := 0; off < len(a.b); off += window {
		p := a.b[off:min(off+window, len(a.b))]
		np := (len(p) + ps - 1) / ps
		_, _, e := syscall.Syscall(syscall.SYS_MINCORE, uintptr(unsafe.Pointer(&p[0])), uintptr(len(p)), uintptr(unsafe.Pointer(&vec[0])))
		if e != 0 {
			return 0, fmt.Errorf("cpu: mincore: %w", e)
		}
		for _, v := range vec[:np] {
			if v&1 != 0 {
				n += int64(ps)
			}
		}
	}
	return n, nil
}

// Evict drops a MapFile arena's pages from the process's mapping
// (MADV_DONTNEED: the data stays in the file and the page cache) and then
// its clean pages from the page cache of f, mapped at off
// (POSIX_FADV_DONTNEED), so that the memory goes back and later reads come
// from disk. Dirty pages are kept (written back in the background): flush
// first to evict everything. Safe for concurrent use with reads.
func (a *Arena) Evict(f *os.File, off int64) error {
	if !a.mapped || len(a.b) == 0 {
		return nil
	}
	if err := syscall.Madvise(a.b, 4); err != nil { // MADV_DONTNEED
		return fmt.Errorf("cpu: madvise: %w", err)
	}
	_, _, e := syscall.Syscall6(syscall.SYS_FADVISE64, f.Fd(), uintptr(off), uintptr(len(a.b)), 4, 0, 0) // POSIX_FADV_DONTNEED
	if e != 0 {
		return fmt.Errorf("cpu: fadvise: %w", e)
	}
	return nil
}

// WillNeed asks the kernel to read the pages of the arena's bytes [off,
// off+n) into memory without waiting for them (MADV_WILLNEED), so that
// the reads of many scattered ranges proceed together; a hint: errors and
// ranges outside the arena are ignored. Safe for concurrent use.
func (a *Arena) WillNeed(off, n int64) {
	if !a.mapped || off < 0 || n <= 0 || off+n > int64(len(a.b)) {
		return
	}
	ps := int64(os.Getpagesize())
	lo := off / ps * ps
	hi := off + n
	p := a.b[lo:hi]
	_, _, _ = syscall.Syscall(syscall.SYS_MADVISE, uintptr(unsafe.Pointer(&p[0])), uintptr(len(p)), 3) // MADV_WILLNEED
}
