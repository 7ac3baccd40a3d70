package cpu

import (
	"errors"
	"testing"
)

// TestLiveBytesAndAllocOutput checks the live-bytes counter over Alloc,
// AllocOutput and Free, and that AllocOutput never maps memory.
func TestLiveBytesAndAllocOutput(t *testing.T) {
	b := New()
	base := LiveBytes()
	small, err := b.Alloc(100)
	if err != nil {
		t.Fatal(err)
	}
	large, err := b.Alloc(4 << 20)
	if err != nil {
		t.Fatal(err)
	}
	out, err := b.AllocOutput(4 << 20)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := LiveBytes()-base, int64(100+8<<20); got != want {
		t.Fatalf("live bytes grew by %d, want %d", got, want)
	}
	if out.(*Arena).mapped {
		t.Error("AllocOutput mapped its arena: want Go heap memory")
	}
	if n := out.Size(); n != 4<<20 {
		t.Errorf("output arena of %d bytes, want %d", n, 4<<20)
	}
	for _, tc := range []struct {
		a    *Arena
		left int64
	}{{large.(*Arena), 100 + 4<<20}, {small.(*Arena), 4 << 20}, {out.(*Arena), 0}} {
		if err := b.Free(tc.a); err != nil {
			t.Fatal(err)
		}
		if got := LiveBytes() - base; got != tc.left {
			t.Fatalf("live bytes %d over the start after a free, want %d", got, tc.left)
		}
	}
	if err := b.Free(out); !errors.Is(err, ErrArena) {
		t.Errorf("second Free: %v, want ErrArena", err)
	}
	if got := LiveBytes() - base; got != 0 {
		t.Errorf("a second Free moved live bytes by %d", got)
	}
	if _, err := b.AllocOutput(-1); !errors.Is(err, ErrBounds) {
		t.Errorf("AllocOutput(-1): %v, want ErrBounds", err)
	}
}
