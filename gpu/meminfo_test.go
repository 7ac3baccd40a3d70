//go:build trajring_cuda

package gpu

import (
	"errors"
	"testing"
)

// TestMemAvailable: the free-memory figure tensorbuf.New checks buffers
// against is positive and drops by at least an allocation's size while it
// is held.
func TestMemAvailable(t *testing.T) {
	b, err := New()
	if err != nil {
		t.Fatal(err)
	}
	before, err := b.MemAvailable()
	if err != nil || before <= 0 {
		t.Fatalf("MemAvailable = %d, %v; want > 0", before, err)
	}
	const n = 64 << 20
	a, err := b.Alloc(n)
	if err != nil {
		t.Fatal(err)
	}
	during, err := b.MemAvailable()
	if err != nil || during > before-n {
		t.Fatalf("MemAvailable with %d bytes allocated = %d, %v; want <= %d", n, during, err, before-n)
	}
	if err := b.Free(a); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := b.MemAvailable(); !errors.Is(err, ErrClosed) {
		t.Fatalf("MemAvailable after Close: %v, want ErrClosed", err)
	}
}
