//go:build trajring_cuda

package gpu

import (
	"errors"
	"fmt"
	"math"
	"testing"
	"unsafe"

	"github.com/trajring/trajring/kernels"
)

// TestNStepCheckMatchesCPU runs NStepCheck on both backends over the same
// random metadata, cursors, drawn windows and weights, each run at a
// random aligned offset of arenas of random guard bytes, and compares the
// arenas whole, byte for byte.
func TestNStepCheckMatchesCPU(t *testing.T) { forGrids(t, testNStepCheckMatchesCPU) }

func testNStepCheckMatchesCPU(t *testing.T, b *Backend) {
	gammas := []float64{0, 1, 0.5, 0.99, 1.0 / 3}
	for trial := range 40 {
		p := newPair(t, b, 4400+uint64(trial))
		rows := 1 + p.rng.Int64N(4)
		capacity := 1 + p.rng.Int64N(30)
		n := p.rng.Int64N(300)
		meta := make([]byte, rows*capacity)
		for i := range meta {
			meta[i] = byte(p.rng.IntN(3)) | byte(p.rng.IntN(3))<<2
			if p.rng.IntN(3) == 0 {
				meta[i] |= 1 << 4
			}
			if p.rng.IntN(6) == 0 {
				meta[i] |= 1 << 5
			}
		}
		cursors := make([]int64, rows)
		for r := range cursors {
			cursors[r] = 1 + p.rng.Int64N(4*capacity)
		}
		wins := make([]kernels.WinDesc, n)
		weights := make([]float64, n)
		for i := range wins {
			r := p.rng.Int64N(rows)
			wins[i] = kernels.WinDesc{Row: r, Start: p.rng.Int64N(min(cursors[r], capacity)), Len: 1 + p.rng.Int64N(capacity)}
			weights[i] = p.rng.Float64()
		}
		metaOff, curOff := p.rng.Int64N(9), 8*p.rng.Int64N(3)
		ma := p.arena(metaOff + rows*capacity + p.rng.Int64N(9))
		ca := p.arena(curOff + 8*rows + 8)
		c := kernels.TransitionCheck{Rows: rows, Capacity: capacity, Horizon: 1 + p.rng.Int64N(capacity+2),
			Gamma: gammas[trial%len(gammas)], N: n, MetaOff: metaOff, CursorsOff: curOff}
		c.WinOff = 8 * p.rng.Int64N(3)
		c.WeightOff = c.WinOff + 24*n + 8*p.rng.Int64N(2)
		c.StepsOff = c.WeightOff + 8*n
		c.CurOff = c.StepsOff + 24*n + 8*p.rng.Int64N(2)
		c.NextOff = c.CurOff + 24*n
		c.ValidOff = c.NextOff + 24*n + p.rng.Int64N(3)
		c.MaskedOff = (c.ValidOff + n + 3) &^ 3
		sa := p.arena(c.MaskedOff + 4*n + p.rng.Int64N(9))
		c.DiscOff = 4 * p.rng.Int64N(3)
		c.DoneOff = c.DiscOff + 4*n + p.rng.Int64N(3)
		oa := p.arena(c.DoneOff + n + p.rng.Int64N(9))
		for _, up := range []struct {
			a   twin
			off int64
			b   []byte
		}{
			{ma, metaOff, meta},
			{ca, curOff, unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(cursors))), 8*rows)},
			{sa, c.WinOff, unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(wins))), 24*n)},
			{sa, c.WeightOff, unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(weights))), 8*n)},
		} {
			if err := b.Upload(up.a.g, up.off, up.b); err != nil {
				t.Fatal(err)
			}
			if err := p.c.Upload(up.a.c, up.off, up.b); err != nil {
				t.Fatal(err)
			}
		}
		gc, cc := c, c
		gc.Meta, gc.Cursors, gc.Sel, gc.Out = ma.g, ca.g, sa.g, oa.g
		cc.Meta, cc.Cursors, cc.Sel, cc.Out = ma.c, ca.c, sa.c, oa.c
		if err := b.NStepCheck(gc); err != nil {
			t.Fatal(err)
		}
		if err := p.c.NStepCheck(cc); err != nil {
			t.Fatal(err)
		}
		p.same(fmt.Sprintf("trial %d selection", trial), sa)
		p.same(fmt.Sprintf("trial %d transitions", trial), oa)
		p.same(fmt.Sprintf("trial %d metadata", trial), ma)
	}
}

// TestNStepCheckErrors checks that bad arguments fail with ErrBounds and
// queue nothing: the outputs keep their bytes.
func TestNStepCheckErrors(t *testing.T) {
	b := newBackend(t)
	p := newPair(t, b, 1)
	ma, ca, sa, oa := p.arena(16), p.arena(16), p.arena(4096), p.arena(256)
	good := kernels.TransitionCheck{Meta: ma.g, Cursors: ca.g, Rows: 2, Capacity: 8, Horizon: 3, Gamma: 0.5, N: 4,
		Sel: sa.g, WinOff: 0, WeightOff: 96, StepsOff: 128, CurOff: 224, NextOff: 320, ValidOff: 416, MaskedOff: 420,
		Out: oa.g, DiscOff: 0, DoneOff: 16}
	bad := map[string]func(c *kernels.TransitionCheck){
		"horizon 0":            func(c *kernels.TransitionCheck) { c.Horizon = 0 },
		"gamma NaN":            func(c *kernels.TransitionCheck) { c.Gamma = math.NaN() },
		"rows past metadata":   func(c *kernels.TransitionCheck) { c.Rows = 3 },
		"misaligned windows":   func(c *kernels.TransitionCheck) { c.StepsOff = 132 },
		"misaligned cursors":   func(c *kernels.TransitionCheck) { c.CursorsOff = 4; c.Rows = 1 },
		"done past the output": func(c *kernels.TransitionCheck) { c.DoneOff = 253 },
		"negative count":       func(c *kernels.TransitionCheck) { c.N = -1 },
	}
	for name, f := range bad {
		c := good
		f(&c)
		if err := b.NStepCheck(c); !errors.Is(err, ErrBounds) {
			t.Errorf("%s: %v, want ErrBounds", name, err)
		}
	}
	if err := b.Sync(); err != nil {
		t.Fatal(err)
	}
	for _, a := range []twin{ma, ca, sa, oa} {
		p.same("after failed checks", a)
	}
}
