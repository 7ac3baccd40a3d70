//go:build !linux

package tensorbuf

// itemMapping is empty where item records stay on the Go heap.
type itemMapping struct{}

// remapMapped declines: without mremap, tables grow by append.
func remapMapped[T any](s []T, _ **itemMapping, _ int64) ([]T, bool) { return s, false }

// mapAnon declines: sum-tree levels stay on the heap.
func mapAnon(int64) ([]byte, bool) { return nil, false }

// unmapAnon is never called where mapAnon declines.
func unmapAnon([]byte) {}
