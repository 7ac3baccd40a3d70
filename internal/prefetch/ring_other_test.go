//go:build !linux

package prefetch

import "testing"

// mapRing allocates n bytes for a benchmark's ring.
func mapRing(b *testing.B, n int) []byte { return make([]byte, n) }
