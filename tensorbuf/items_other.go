//go:build !linux

package tensorbuf

// itemMapping is empty where item records stay on the Go heap.
type itemMapping struct{}

// remapItems declines: without mremap, records grow by append.
func remapItems(items []item, _ **itemMapping, _ int64) ([]item, bool) { return items, false }
