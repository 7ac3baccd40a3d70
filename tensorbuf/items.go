package tensorbuf

import (
	"slices"
	"unsafe"
)

// itemsMapMin is the size in bytes from which a table's item records
// move off the Go heap into a mapping of their own (where the platform
// has one; see growMapped). A variable so that internal tests can map
// small tables.
var itemsMapMin int64 = 8 << 20

// itemsMapAlign is what a mapped item array's size is rounded up to: a
// 2 MiB huge page (a variable for the same tests).
var itemsMapAlign int64 = 2 << 20

// growMapped returns s with room for at least one more element, its
// contents and length unchanged. T must hold no pointers. Small arrays
// grow on the Go heap as append grows them. From itemsMapMin bytes on,
// the elements live in an anonymous mapping that *m owns, with huge pages
// asked for, and grow in place by remapping: a table of 100M items (9.6 GB
// of records) then never holds the old and the new array at once, as an
// append's copy does, and random reads mostly hit huge pages. The mapping
// is unmapped by a cleanup once its table is unreachable: like heap
// memory, it goes back after a garbage collection (which the mapping does
// not pace: GOGC does not count it). Where the kernel refuses, s grows on
// the heap. The race detector does not watch mapped memory: the race
// tests' tables stay below itemsMapMin, on the heap. The caller holds the
// table's lock; no pointer into s may be held across the call.
func growMapped[T any](s []T, m **itemMapping) []T {
	n := len(s)
	want := max(n+n/2, n+16)
	size := int64(unsafe.Sizeof(*new(T)))
	if bytes := int64(want) * size; bytes >= itemsMapMin {
		bytes = (bytes + itemsMapAlign - 1) / itemsMapAlign * itemsMapAlign
		if grown, ok := remapMapped(s, m, bytes); ok {
			return grown
		}
	}
	return slices.Grow(s, want-n)
}
