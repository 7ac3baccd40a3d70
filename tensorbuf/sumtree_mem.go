package tensorbuf

import (
	"runtime"
	"unsafe"
)

// treeMaps owns the anonymous mappings that a sum tree's large levels
// live in (see treeFloats): at 100M items the leaves' level alone is
// 1 GB, and on the Go heap's 4 KiB pages every level a descent reads past
// the cache cost a page walk besides its miss. A tree's levels are
// replaced whole when it grows (grow unmaps the old ones at once, through
// release); the cleanup unmaps those of a tree that became unreachable.
// Not safe for concurrent use (the table's lock guards its tree).
type treeMaps struct{ ref *treeMapSet }

type treeMapSet struct{ bs [][]byte }

func newTreeMaps() *treeMaps {
	tm := &treeMaps{ref: &treeMapSet{}}
	runtime.AddCleanup(tm, func(s *treeMapSet) {
		for _, b := range s.bs {
			unmapAnon(b)
		}
	}, tm.ref)
	return tm
}

// floats returns n zeroed float64s in a new mapping with huge pages
// asked for, starting 64 bytes into it (alignedFloats' contract: aligned
// to a line, with the tree's own memory before them), or false where the
// platform or the kernel has none.
func (tm *treeMaps) floats(n int) ([]float64, bool) {
	b, ok := mapAnon(int64(n)*8 + 64)
	if !ok {
		return nil, false
	}
	tm.ref.bs = append(tm.ref.bs, b)
	return unsafe.Slice((*float64)(unsafe.Pointer(&b[64])), n), true
}

// release unmaps every level tm holds; the caller no longer uses them.
func (tm *treeMaps) release() {
	for _, b := range tm.ref.bs {
		unmapAnon(b)
	}
	tm.ref.bs = nil
}

// treeFloats returns n zeroed float64s for a tree level being built into
// mem (made on first use): from itemsMapMin bytes on in a mapping of its
// own, else alignedFloats.
func treeFloats(n int, mem **treeMaps) []float64 {
	if int64(n)*8 >= itemsMapMin {
		if *mem == nil {
			*mem = newTreeMaps()
		}
		if f, ok := (*mem).floats(n); ok {
			return f
		}
	}
	return alignedFloats(n)
}
