//go:build cgo

package host

import (
	"testing"

	"github.com/trajring/trajring/kernels"
)

// TestLanesMatchGo: the grid the gpu backend sizes with kernels.Lanes
// must match the group size the kernels pick.
func TestLanesMatchGo(t *testing.T) {
	for w := int64(1); w <= 5000; w++ {
		if c, g := lanes(w), kernels.Lanes(w); c != g {
			t.Fatalf("words %d: tr_lanes %d, kernels.Lanes %d", w, c, g)
		}
	}
}
