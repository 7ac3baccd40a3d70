package cpu

import (
	"errors"
	"testing"
	"unsafe"

	"github.com/trajring/trajring/kernels"
)

func f32Arena(t *testing.T, b *Backend, vals []float32) kernels.Arena {
	t.Helper()
	a, err := b.Alloc(int64(4 * len(vals)))
	if err != nil {
		t.Fatal(err)
	}
	copy(unsafe.Slice((*float32)(unsafe.Pointer(&a.(*Arena).b[0])), len(vals)), vals)
	return a
}

func f32s(a kernels.Arena) []float32 {
	h := a.(*Arena)
	return unsafe.Slice((*float32)(unsafe.Pointer(&h.b[0])), len(h.b)/4)
}

func TestNStepReward(t *testing.T) {
	b := New()
	// Two rows of capacity 4: row 0 holds 1 2 4 8, row 1 holds 16 32 64 128.
	ring := f32Arena(t, b, []float32{1, 2, 4, 8, 16, 32, 64, 128})
	const guard = float32(-7)
	for _, tc := range []struct {
		name  string
		wins  []kernels.Window
		gamma float64
		want  []float32
	}{
		{"one step", []kernels.Window{{Row: 0, Start: 0, Len: 1}, {Row: 1, Start: 2, Len: 1}}, 0.5, []float32{1, 64}},
		{"gamma 1", []kernels.Window{{Row: 0, Start: 0, Len: 4}}, 1, []float32{15}},
		{"gamma half", []kernels.Window{{Row: 0, Start: 1, Len: 3}}, 0.5, []float32{2 + 2 + 2}},
		// Start 6 of row 1 is slot 2: 64, then 128, then wraps to 16.
		{"wraps", []kernels.Window{{Row: 1, Start: 6, Len: 3}}, 0.5, []float32{64 + 64 + 4}},
		{"gamma 0", []kernels.Window{{Row: 1, Start: 1, Len: 3}}, 0, []float32{32}},
		{"empty window", []kernels.Window{{Row: 1, Start: 1, Len: 0}}, 0.9, []float32{0}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := f32Arena(t, b, make([]float32, len(tc.wins)+2))
			o := f32s(out)
			for i := range o {
				o[i] = guard
			}
			if err := b.NStepReward(ring, out, 4, tc.wins, 4, tc.gamma); err != nil {
				t.Fatal(err)
			}
			if o[0] != guard || o[len(o)-1] != guard {
				t.Fatalf("guards overwritten: %v", o)
			}
			for i, w := range tc.want {
				if o[1+i] != w {
					t.Fatalf("sum %d = %v, want %v", i, o[1+i], w)
				}
			}
		})
	}
}

func TestNStepRewardRejects(t *testing.T) {
	b := New()
	ring := f32Arena(t, b, make([]float32, 8))
	out := f32Arena(t, b, []float32{5, 5})
	ok := []kernels.Window{{Row: 1, Start: 3, Len: 2}}
	for _, tc := range []struct {
		name   string
		off    int64
		wins   []kernels.Window
		cap    int64
		gamma  float64
		noRing bool
	}{
		{"row", 0, []kernels.Window{{Row: 2, Start: 0, Len: 1}}, 4, 0.5, false},
		{"negative start", 0, []kernels.Window{{Row: 0, Start: -1, Len: 1}}, 4, 0.5, false},
		{"too long", 0, []kernels.Window{{Row: 0, Start: 0, Len: 5}}, 4, 0.5, false},
		{"gamma", 0, ok, 4, 1.5, false},
		{"capacity", 0, ok, 3, 0.5, false},
		{"unaligned", 2, ok, 4, 0.5, false},
		{"past end", 8, ok, 4, 0.5, false},
		{"freed ring", 0, ok, 4, 0.5, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := ring
			if tc.noRing {
				r = &Arena{}
			}
			if err := b.NStepReward(r, out, tc.off, tc.wins, tc.cap, tc.gamma); !errors.Is(err, ErrBounds) && !errors.Is(err, ErrArena) {
				t.Fatalf("err = %v", err)
			}
			if o := f32s(out); o[0] != 5 || o[1] != 5 {
				t.Fatalf("rejected call wrote %v", o)
			}
		})
	}
}
