//go:build !linux

package tensorbuf

// itemMapping is empty where item records stay on the Go heap.
type itemMapping struct{}

// remapMapped declines: without mremap, tables grow by append.
func remapMapped[T any](s []T, _ **itemMapping, _ int64) ([]T, bool) { return s, false }
