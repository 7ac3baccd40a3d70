//go:build cgo

package host

import (
	"bytes"
	"math"
	"testing"
	"unsafe"

	"github.com/trajring/trajring/kernels"
)

// f32s writes v into C memory.
func (e *env) f32s(v []float32) *Mem {
	m := e.mem(4 * max(len(v), 1))
	copy(unsafe.Slice((*float32)(unsafe.Pointer(&m.Bytes()[0])), len(v)), v)
	return m
}

func (e *env) wins(w []kernels.WinDesc) *Mem {
	m := e.mem(max(len(w), 1) * kernels.WinDescSize)
	copy(unsafe.Slice((*kernels.WinDesc)(unsafe.Pointer(&m.Bytes()[0])), len(w)), w)
	return m
}

// reward returns a float32 of random sign and magnitude: small integers,
// wide-range normals, and now and then a subnormal or zero.
func (e *env) reward() float32 {
	switch e.rng.IntN(8) {
	case 0:
		return float32(e.rng.IntN(21) - 10)
	case 1:
		return math.Float32frombits(e.rng.Uint32() & 0x807fffff) // subnormal or ±0
	default:
		return float32(e.rng.NormFloat64() * math.Pow(10, float64(e.rng.IntN(13)-6)))
	}
}

// gammas mixes the edges of [0, 1] with values whose powers round.
var gammas = []float64{0, 1, 0.5, 0.99, 1.0 / 3, 0.9999999}

func TestNStepRewardMatchesCPU(t *testing.T) {
	for trial := range 120 {
		e := newEnv(t, 4000+uint64(trial))
		grid := grids[trial%len(grids)]
		rows := int64(1 + e.rng.IntN(5))
		capacity := int64(1 + e.rng.IntN(40))
		n := e.rng.IntN(60) // zero windows too
		gamma := e.rng.Float64()
		if trial%2 == 0 {
			gamma = gammas[trial/2%len(gammas)]
		}
		// Every fifth trial sums ±3^k with gamma 1/3: partial sums cancel
		// exactly, so the rounding of each product shows in the float32
		// result (a fused multiply-add would leave ~2^-55 instead of 0).
		cancel := trial%5 == 4
		if cancel {
			gamma = 1.0 / 3
		}
		rew := make([]float32, rows*capacity)
		for i := range rew {
			rew[i] = e.reward()
			if cancel {
				rew[i] = float32([]int{1, 3, 9}[e.rng.IntN(3)] * (1 - 2*e.rng.IntN(2)))
			}
		}
		wins := make([]kernels.Window, n)
		descs := make([]kernels.WinDesc, n)
		for i := range wins {
			w := kernels.Window{
				Row:   e.rng.Int64N(rows),
				Start: e.rng.Int64N(10 * capacity), // absolute: wraps around the ring
				Len:   e.rng.Int64N(capacity + 1),
			}
			if e.rng.IntN(4) == 0 {
				w.Len = capacity
			}
			wins[i] = w
			descs[i] = kernels.WinDesc(w)
			if trial%3 != 0 { // the gpu wrapper passes slots; the kernel takes either
				descs[i].Start %= capacity
			}
		}
		ring := e.f32s(rew)
		ringRef, err := e.be.Alloc(4 * rows * capacity)
		if err != nil {
			t.Fatal(err)
		}
		if err := e.be.Upload(ringRef, 0, ring.Bytes()[:4*rows*capacity]); err != nil {
			t.Fatal(err)
		}
		// The output run sits between guard floats, at a 4-byte aligned
		// offset, in both builds.
		off := 4 * (guard/4 + e.rng.IntN(5))
		size := off + 4*n + guard
		init := e.random(size)
		out := e.mem(size)
		copy(out.Bytes(), init)
		outRef, err := e.be.Alloc(int64(size))
		if err != nil {
			t.Fatal(err)
		}
		if err := e.be.Upload(outRef, 0, init); err != nil {
			t.Fatal(err)
		}
		if err := e.be.NStepReward(ringRef, outRef, int64(off), wins, capacity, gamma); err != nil {
			t.Fatal(err)
		}
		wm := e.wins(descs)
		if err := Launch(kernels.NStepReward, grid[0], grid[1], grid[2],
			ring.Addr(0), out.Addr(off), wm.Addr(0), uint64(n), uint64(capacity), math.Float64bits(gamma), 4); err != nil {
			t.Fatal(err)
		}
		want := make([]byte, size)
		if err := e.be.Download(want, outRef, 0); err != nil {
			t.Fatal(err)
		}
		got := out.Bytes()
		if !bytes.Equal(got[:off], init[:off]) || !bytes.Equal(got[off+4*n:], init[off+4*n:]) {
			t.Fatalf("trial %d: guard floats around the output were written", trial)
		}
		for i := range n {
			g := math.Float32frombits(*(*uint32)(unsafe.Pointer(&got[off+4*i])))
			w := math.Float32frombits(*(*uint32)(unsafe.Pointer(&want[off+4*i])))
			if math.Float32bits(g) != math.Float32bits(w) {
				t.Fatalf("trial %d (rows %d, capacity %d, gamma %v): window %d %+v: sum %v (%#08x), cpu %v (%#08x)",
					trial, rows, capacity, gamma, i, wins[i], g, math.Float32bits(g), w, math.Float32bits(w))
			}
		}
	}
}

// TestNStepRewardExact pins sums worked out by hand, including a
// wrap-around window and one that a fused multiply-add would get wrong.
func TestNStepRewardExact(t *testing.T) {
	tests := []struct {
		name     string
		ring     []float32 // one row per capacity floats
		capacity int64
		gamma    float64
		wins     []kernels.WinDesc
		want     []float32
	}{
		{
			name: "halving", ring: []float32{1, 2, 3, 4}, capacity: 4, gamma: 0.5,
			wins: []kernels.WinDesc{{Row: 0, Start: 2, Len: 3}, {Row: 0, Start: 0, Len: 0}, {Row: 0, Start: 1, Len: 1}},
			want: []float32{3 + 0.5*4 + 0.25*1, 0, 2},
		},
		{
			name: "second row, absolute start", ring: []float32{1, 1, 1, 10, 20, 30}, capacity: 3, gamma: 1,
			wins: []kernels.WinDesc{{Row: 1, Start: 7, Len: 3}, {Row: 1, Start: 5, Len: 2}},
			want: []float32{60, 30 + 10},
		},
		{
			name: "gamma zero keeps the first reward", ring: []float32{-7, 100}, capacity: 2, gamma: 0,
			wins: []kernels.WinDesc{{Row: 0, Start: 0, Len: 2}, {Row: 0, Start: 1, Len: 2}},
			want: []float32{-7, 100},
		},
		{
			// -1 + round(3 * (1/3)) = -1 + 1 = 0 exactly; fused, the
			// error of 1/3 survives as -2^-55.
			name: "no fused multiply-add", ring: []float32{-1, 3}, capacity: 2, gamma: 1.0 / 3,
			wins: []kernels.WinDesc{{Row: 0, Start: 0, Len: 2}},
			want: []float32{0},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, 5)
			ring, wm := e.f32s(tc.ring), e.wins(tc.wins)
			out := e.f32s(make([]float32, len(tc.wins)+2))
			for _, g := range grids {
				for i := range out.Bytes() {
					out.Bytes()[i] = 0xAB
				}
				if err := Launch(kernels.NStepReward, g[0], g[1], g[2], ring.Addr(0), out.Addr(4), wm.Addr(0),
					uint64(len(tc.wins)), uint64(tc.capacity), math.Float64bits(tc.gamma), 4); err != nil {
					t.Fatal(err)
				}
				got := unsafe.Slice((*float32)(unsafe.Pointer(&out.Bytes()[0])), len(tc.wins)+2)
				guard := math.Float32frombits(0xABABABAB)
				want := append(append([]float32{guard}, tc.want...), guard)
				for i := range want {
					if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
						t.Fatalf("grid %v: out = %v, want %v (first and last are guards)", g, got, want)
					}
				}
			}
		})
	}
}
