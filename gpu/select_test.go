//go:build trajring_cuda

package gpu

import (
	"bytes"
	"errors"
	"fmt"
	"testing"
	"unsafe"

	"github.com/trajring/trajring/kernels"
)

// TestDeviceSelectionMatchesCPU runs the device-selection pipeline of a
// table sample on both backends from the same random state: PatchItems
// (every live position, then random distinct records and entries),
// DrawUniform and GatherWindowsAt reading the drawn windows, and compares
// the mirror, the draw outputs and the gathered outputs byte for byte,
// whole arenas with random guard bytes around every output included.
func TestDeviceSelectionMatchesCPU(t *testing.T) { forGrids(t, testDeviceSelectionMatchesCPU) }

func testDeviceSelectionMatchesCPU(t *testing.T, b *Backend) {
	for trial := range 40 {
		p := newPair(t, b, 900+uint64(trial))
		capacity := 1 + p.rng.Int64N(20)
		rows := 1 + p.rng.Int64N(5)
		seqLen := 1 + p.rng.Int64N(8)
		slots := 1 + p.rng.Int64N(300)
		nlive := 1 + p.rng.Int64N(slots)
		// The mirror: records and live list in one arena, each at a random
		// 8-byte-aligned offset, guard bytes around and between them.
		itemsOff := 8 * p.rng.Int64N(5)
		liveOff := itemsOff + slots*kernels.ItemRecSize + 4*p.rng.Int64N(5)
		mir := p.arena(liveOff + slots*kernels.LiveSize + p.rng.Int64N(40))
		gm := kernels.Mirror{Items: mir.g, ItemsOff: itemsOff, Live: mir.g, LiveOff: liveOff, Slots: slots}
		cm := gm
		cm.Items, cm.Live = mir.c, mir.c
		rec := func() kernels.ItemRec {
			return kernels.ItemRec{Row: p.rng.Int64N(rows), Start: p.rng.Int64N(1000 * capacity),
				Len: p.rng.Int64N(min(seqLen, capacity) + 1), Key: p.rng.Uint64()}
		}
		var items []kernels.ItemPatch
		for s := range slots {
			items = append(items, kernels.ItemPatch{Slot: s, Rec: rec(), Weight: p.rng.Float64()})
		}
		var live []kernels.LivePatch
		for pos := range slots {
			live = append(live, kernels.LivePatch{Pos: pos, Slot: p.rng.Int64N(slots)})
		}
		for _, be := range []interface {
			PatchItems(kernels.Mirror, []kernels.ItemPatch, []kernels.LivePatch) error
		}{b, p.c} {
			m := gm
			if be != b {
				m = cm
			}
			if err := be.PatchItems(m, items, live); err != nil {
				t.Fatal(err)
			}
		}
		// A second patch of a random subset, each slot and position once.
		items, live = items[:0], live[:0]
		for _, s := range p.rng.Perm(int(slots))[:p.rng.IntN(int(slots)+1)] {
			items = append(items, kernels.ItemPatch{Slot: int64(s), Rec: rec()})
		}
		for _, pos := range p.rng.Perm(int(slots))[:p.rng.IntN(int(slots)+1)] {
			live = append(live, kernels.LivePatch{Pos: int64(pos), Slot: p.rng.Int64N(slots)})
		}
		if err := b.PatchItems(gm, items, live); err != nil {
			t.Fatal(err)
		}
		if err := p.c.PatchItems(cm, items, live); err != nil {
			t.Fatal(err)
		}
		p.same(fmt.Sprintf("trial %d mirror", trial), mir)

		n := p.rng.Int64N(70)
		winOff := 8 * p.rng.Int64N(4)
		keyOff := winOff + n*kernels.WinDescSize + 8*p.rng.Int64N(4)
		probOff := keyOff + 8*n + 8*p.rng.Int64N(4)
		wOff := probOff + 8*n + 8*p.rng.Int64N(4)
		out := p.arena(wOff + 8*n + p.rng.Int64N(40))
		d := kernels.UniformDraw{Mirror: gm, NLive: nlive, Seed: p.rng.Uint64(), Call: p.rng.Uint64() >> p.rng.IntN(64),
			Prob: 1 / float64(nlive), Capacity: capacity, N: n, Out: out.g, WinOff: winOff, KeyOff: keyOff, ProbOff: probOff, WeightOff: wOff}
		if err := b.DrawUniform(d); err != nil {
			t.Fatal(err)
		}
		d.Mirror, d.Out = cm, out.c
		if err := p.c.DrawUniform(d); err != nil {
			t.Fatal(err)
		}
		p.same(fmt.Sprintf("trial %d draw", trial), out)

		steps := n * seqLen
		var gc, cc []kernels.Column
		var outs []twin
		for range p.rng.IntN(4) {
			s := p.step()
			ring := p.arena(rows * capacity * s)
			o, off := p.out(steps, s)
			outs = append(outs, o)
			g := kernels.Column{Ring: ring.g, StepBytes: s, Out: o.g, OutOff: off}
			h := kernels.Column{Ring: ring.c, StepBytes: s, Out: o.c, OutOff: off}
			if p.rng.IntN(2) == 0 {
				g.Pad = p.random(s)
				h.Pad = g.Pad
			}
			gc, cc = append(gc, g), append(cc, h)
		}
		mask, moff := p.out(steps, 1)
		outs = append(outs, mask)
		if err := b.GatherWindowsAt(gc, out.g, winOff, n, seqLen, capacity, mask.g, moff); err != nil {
			t.Fatal(err)
		}
		if err := p.c.GatherWindowsAt(cc, out.c, winOff, n, seqLen, capacity, mask.c, moff); err != nil {
			t.Fatal(err)
		}
		for i, o := range outs {
			p.same(fmt.Sprintf("trial %d gathered output %d", trial, i), o)
		}
	}
}

// TestDeviceSelectionRefusals: bad arguments fail with ErrBounds (or
// ErrArena) before anything is queued: no launch is counted.
func TestDeviceSelectionRefusals(t *testing.T) {
	b := newBackend(t)
	a, err := b.Alloc(4096)
	if err != nil {
		t.Fatal(err)
	}
	small, _ := b.Alloc(8)
	m := kernels.Mirror{Items: a, Live: a, LiveOff: 2048, Slots: 16}
	draw := kernels.UniformDraw{Mirror: m, NLive: 4, Prob: 0.25, Capacity: 8, N: 2, Out: a, WinOff: 1024, KeyOff: 1200, ProbOff: 1300, WeightOff: 1400}
	before := b.Launches()
	for _, tc := range []struct {
		name string
		err  error
		call func() error
	}{
		{"patch slot past the mirror", ErrBounds, func() error {
			return b.PatchItems(m, []kernels.ItemPatch{{Slot: 16}}, nil)
		}},
		{"live slot past the mirror", ErrBounds, func() error {
			return b.PatchItems(m, nil, []kernels.LivePatch{{Pos: 0, Slot: -1}})
		}},
		{"mirror past its arena", ErrBounds, func() error {
			m := m
			m.Slots = 1000
			return b.PatchItems(m, nil, nil)
		}},
		{"foreign mirror arena", ErrArena, func() error {
			m := m
			m.Items = &Arena{}
			return b.PatchItems(m, nil, nil)
		}},
		{"no live items", ErrBounds, func() error { d := draw; d.NLive = 0; return b.DrawUniform(d) }},
		{"more live than slots", ErrBounds, func() error { d := draw; d.NLive = 17; return b.DrawUniform(d) }},
		{"capacity 0", ErrBounds, func() error { d := draw; d.Capacity = 0; return b.DrawUniform(d) }},
		{"unaligned keys", ErrBounds, func() error { d := draw; d.KeyOff = 1201; return b.DrawUniform(d) }},
		{"weights past the output", ErrBounds, func() error { d := draw; d.Out = small; return b.DrawUniform(d) }},
		{"windows past their arena", ErrBounds, func() error {
			return b.GatherWindowsAt(nil, small, 0, 1, 1, 8, a, 0)
		}},
		{"sequence length 0", ErrBounds, func() error { return b.GatherWindowsAt(nil, a, 0, 1, 0, 8, a, 0) }},
		{"mask too small", ErrBounds, func() error { return b.GatherWindowsAt(nil, a, 0, 10, 2, 8, small, 0) }},
	} {
		if err := tc.call(); !errors.Is(err, tc.err) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.err)
		}
	}
	if got := b.Launches(); got != before {
		t.Errorf("%d launches after refused calls", got-before)
	}
}

// TestGatherWindowsAtColumnCache: GatherWindowsAt's device copy of the
// column descriptors follows every change of the columns (a pad changed
// in place, another output offset, more sets of columns than the cache
// holds) and is reused when they do not change.
func TestGatherWindowsAtColumnCache(t *testing.T) {
	b := newBackend(t)
	ring, _ := b.Alloc(8)
	if err := b.Upload(ring, 0, []byte{10, 11, 12, 13, 20, 21, 22, 23}); err != nil {
		t.Fatal(err)
	}
	wins, _ := b.Alloc(2 * kernels.WinDescSize)
	wd := []kernels.WinDesc{{Row: 1, Start: 2, Len: 2}, {Row: 0, Start: 3, Len: 1}}
	if err := b.Upload(wins, 0, unsafe.Slice((*byte)(unsafe.Pointer(&wd[0])), 2*kernels.WinDescSize)); err != nil {
		t.Fatal(err)
	}
	var outs []kernels.Arena
	for range colCacheSize + 2 {
		o, _ := b.Alloc(16)
		outs = append(outs, o)
	}
	pad := []byte{99}
	gather := func(out kernels.Arena, off int64, want []byte) {
		t.Helper()
		cols := []kernels.Column{{Ring: ring, StepBytes: 1, Out: out, OutOff: off, Pad: pad}}
		if err := b.GatherWindowsAt(cols, wins, 0, 2, 3, 4, nil, 0); err != nil {
			t.Fatal(err)
		}
		got := make([]byte, 16)
		if err := b.Download(got, out, 0); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got[off:off+6], want) {
			t.Fatalf("out %v, want %v at %d", got, want, off)
		}
	}
	gather(outs[0], 0, []byte{22, 23, 99, 13, 99, 99})
	tick := b.colTick
	gather(outs[0], 0, []byte{22, 23, 99, 13, 99, 99})
	if c := b.colCache; c[0].used != tick+1 || c[1].block != nil {
		t.Fatalf("second call did not reuse the cached descriptors: %+v", c[:2])
	}
	pad[0] = 77 // changed in place: the cache compares the bytes
	gather(outs[0], 0, []byte{22, 23, 77, 13, 77, 77})
	gather(outs[0], 5, []byte{22, 23, 77, 13, 77, 77})
	for i, o := range outs {
		pad[0] = byte(i)
		gather(o, 1, []byte{22, 23, byte(i), 13, byte(i), byte(i)})
	}
	pad[0] = 5
	gather(outs[0], 1, []byte{22, 23, 5, 13, 5, 5})
}

// TestGatherWindowsAtRechecksCachedColumns: a set of columns GatherWindowsAt
// has checked and cached skips the checks only for gathers they cover (as
// many output steps or fewer, the same capacity) while every arena lives:
// more steps, another capacity, or a freed output or ring are refused
// (nothing launched) as for columns seen the first time.
func TestGatherWindowsAtRechecksCachedColumns(t *testing.T) {
	b := newBackend(t)
	ring, _ := b.Alloc(8)
	wins, _ := b.Alloc(2 * kernels.WinDescSize)
	out, _ := b.Alloc(16)
	cols := []kernels.Column{{Ring: ring, StepBytes: 1, Out: out}}
	if err := b.GatherWindowsAt(cols, wins, 0, 2, 3, 4, nil, 0); err != nil {
		t.Fatal(err)
	}
	if err := b.GatherWindowsAt(cols, wins, 0, 2, 2, 4, nil, 0); err != nil { // fewer steps: covered
		t.Fatal(err)
	}
	before := b.Launches()
	for _, tc := range []struct {
		name string
		err  error
		call func() error
	}{
		{"more steps than the output holds", ErrBounds, func() error { return b.GatherWindowsAt(cols, wins, 0, 2, 9, 4, nil, 0) }},
		{"a capacity the ring cannot hold", ErrBounds, func() error { return b.GatherWindowsAt(cols, wins, 0, 2, 3, 16, nil, 0) }},
		{"output freed", ErrArena, func() error {
			if err := b.Free(out); err != nil {
				return err
			}
			return b.GatherWindowsAt(cols, wins, 0, 2, 3, 4, nil, 0)
		}},
		{"ring freed", ErrArena, func() error {
			o2, _ := b.Alloc(16)
			c2 := []kernels.Column{{Ring: ring, StepBytes: 1, Out: o2}}
			if err := b.GatherWindowsAt(c2, wins, 0, 2, 3, 4, nil, 0); err != nil {
				return err
			}
			before++ // that gather launched
			if err := b.Free(ring); err != nil {
				return err
			}
			return b.GatherWindowsAt(c2, wins, 0, 2, 3, 4, nil, 0)
		}},
	} {
		if err := tc.call(); !errors.Is(err, tc.err) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.err)
		}
	}
	if got := b.Launches(); got != before {
		t.Errorf("%d launches after refused calls", got-before)
	}
}
