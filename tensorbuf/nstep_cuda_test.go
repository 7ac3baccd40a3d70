//go:build trajring_cuda

package tensorbuf_test

import (
	"testing"

	"github.com/trajring/trajring/gpu"
	"github.com/trajring/trajring/tensorbuf"
)

// The gpu backend sums n-step rewards with its own kernel
// (kernels/nstep_reward.cu) instead of the gather-and-sum fallback.
var _ tensorbuf.NStepper = (*gpu.Backend)(nil)

// TestDefaultBackendIsNStepper checks that cuda builds' default backend,
// which the "default" cases of the n-step tests run on, takes the kernel
// path.
func TestDefaultBackendIsNStepper(t *testing.T) {
	be, err := tensorbuf.DefaultBackend()
	if err != nil {
		t.Fatalf("DefaultBackend: %v", err)
	}
	if _, ok := be.(tensorbuf.NStepper); !ok {
		t.Fatalf("default backend %q (%T) does not implement NStepper", be.Name(), be)
	}
	if _, ok := be.(*gpu.Backend); !ok {
		t.Fatalf("default backend of a cuda build is %T, want *gpu.Backend", be)
	}
}
