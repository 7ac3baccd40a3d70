package tensorbuf

import (
	"runtime"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// itemMapping owns the anonymous mapping a table's item records live in
// (see growMapped); ref is what its cleanup unmaps, kept apart so that
// the cleanup does not keep the mapping reachable.
type itemMapping struct {
	ref    *mappedBytes
	remaps int // times grown in place, for tests
}

type mappedBytes struct{ b []byte }

const madvHugePage = 14 // MADV_HUGEPAGE

// itemsUnmapped counts the item mappings unmapped by their cleanups, for
// tests.
var itemsUnmapped atomic.Int64

// remapMapped moves items into *m's mapping grown to bytes (a new mapping
// when *m is nil or items no longer lives in it) and returns them there;
// false when the kernel refuses, leaving items and *m as they were.
func remapMapped[T any](items []T, m **itemMapping, bytes int64) ([]T, bool) {
	of := func(b []byte) []T {
		return unsafe.Slice((*T)(unsafe.Pointer(unsafe.SliceData(b))), bytes/int64(unsafe.Sizeof(*new(T))))[:len(items)]
	}
	cur := *m
	if cur != nil && len(items) > 0 && unsafe.Pointer(unsafe.SliceData(items)) == unsafe.Pointer(unsafe.SliceData(cur.ref.b)) {
		b, err := unix.Mremap(cur.ref.b, int(bytes), unix.MREMAP_MAYMOVE)
		if err != nil {
			return items, false
		}
		_ = unix.Madvise(b, madvHugePage) // a hint: fine to be refused
		cur.ref.b = b                     // the elements moved with the pages
		cur.remaps++
		return of(b), true
	}
	// No mapping yet, or the elements moved to the heap after a refused
	// remap (growMapped): a new one, the old left to its cleanup.
	b, ok := mapAnon(bytes)
	if !ok {
		return items, false
	}
	grown := of(b)
	copy(grown, items)
	nm := &itemMapping{ref: &mappedBytes{b: b}}
	runtime.AddCleanup(nm, func(r *mappedBytes) {
		if unix.Munmap(r.b) == nil {
			itemsUnmapped.Add(1)
		}
	}, nm.ref)
	*m = nm
	return grown, true
}

// mapAnon returns a new private anonymous mapping of bytes, with huge
// pages asked for, or false when the kernel refuses.
func mapAnon(bytes int64) ([]byte, bool) {
	b, err := unix.Mmap(-1, 0, int(bytes), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANON)
	if err != nil {
		return nil, false
	}
	_ = unix.Madvise(b, madvHugePage) // a hint: fine to be refused
	return b, true
}

// unmapAnon unmaps a mapping made by mapAnon.
func unmapAnon(b []byte) { _ = unix.Munmap(b) }
