//go:build cgo

package host

import (
	"fmt"
	"testing"
	"unsafe"

	"github.com/trajring/trajring/kernels"
)

func TestSelectLayout(t *testing.T) {
	for _, c := range []struct {
		name       string
		size, want uintptr
	}{
		{"ItemRec (tr_item)", unsafe.Sizeof(kernels.ItemRec{}), kernels.ItemRecSize},
		{"ItemPatch (tr_item_patch)", unsafe.Sizeof(kernels.ItemPatch{}), kernels.ItemPatchSize},
		{"LivePatch (tr_live_patch)", unsafe.Sizeof(kernels.LivePatch{}), kernels.LivePatchSize},
		{"C tr_item", cSizes()[0], kernels.ItemRecSize},
		{"C tr_item_patch", cSizes()[1], kernels.ItemPatchSize},
		{"C tr_live_patch", cSizes()[2], kernels.LivePatchSize},
	} {
		if c.size != c.want {
			t.Errorf("%s is %d bytes, want %d", c.name, c.size, c.want)
		}
	}
}

// TestSelectMatchesCPU runs the host build of trajring_patch_items and
// trajring_draw_uniform against the cpu backend's PatchItems and
// DrawUniform on random mirrors, draws and launch grids, comparing the
// mirror and the outputs byte for byte with guard bytes around them.
func TestSelectMatchesCPU(t *testing.T) {
	for trial := range 80 {
		e := newEnv(t, 7000+uint64(trial))
		grid := grids[trial%len(grids)]
		slots := 1 + e.rng.Int64N(200)
		nlive := 1 + e.rng.Int64N(slots)
		capacity := 1 + e.rng.Int64N(1<<20)
		if trial%4 == 0 {
			capacity = 1<<33 + e.rng.Int64N(1000) // a 64-bit modulo
		}
		// Mirror: records, then the live list, in one guarded buffer.
		liveOff := slots * kernels.ItemRecSize
		mir := e.buf(int(liveOff + slots*kernels.LiveSize))
		if mir.off%8 != 0 { // the records are 8-byte words
			mir = e.alignedBuf(int(liveOff + slots*kernels.LiveSize))
		}
		cm := kernels.Mirror{Items: mir.ref, Live: mir.ref, LiveOff: liveOff, Slots: slots}
		var items []kernels.ItemPatch
		for _, s := range e.rng.Perm(int(slots)) {
			items = append(items, kernels.ItemPatch{Slot: int64(s), Rec: kernels.ItemRec{
				Row: e.rng.Int64N(8), Start: e.rng.Int64N(1 << 62), Len: e.rng.Int64N(100), Key: e.rng.Uint64()}})
		}
		var live []kernels.LivePatch
		for _, pos := range e.rng.Perm(int(slots)) {
			live = append(live, kernels.LivePatch{Pos: int64(pos), Slot: e.rng.Int64N(slots)})
		}
		if err := e.be.PatchItems(cm, items, live); err != nil {
			t.Fatal(err)
		}
		pi, pl := e.patches(items), e.lives(live)
		if err := Launch(kernels.PatchItems, grid[0], grid[1], grid[2],
			mir.addr(), mir.addr()+uint64(liveOff), 0, pi.Addr(0), uint64(len(items)), pl.Addr(0), uint64(len(live)), 0, 0); err != nil {
			t.Fatal(err)
		}
		e.check(fmt.Sprintf("trial %d mirror", trial), mir)

		n := e.rng.Int64N(300)
		keyOff := n * kernels.WinDescSize
		out := e.alignedBuf(int(keyOff + 24*n))
		d := kernels.UniformDraw{Mirror: cm, NLive: nlive, Seed: e.rng.Uint64(), Call: e.rng.Uint64() >> e.rng.IntN(64),
			Prob: 1 / float64(nlive), Capacity: capacity, N: n, Out: out.ref, KeyOff: keyOff, ProbOff: keyOff + 8*n, WeightOff: keyOff + 16*n}
		if err := e.be.DrawUniform(d); err != nil {
			t.Fatal(err)
		}
		o := out.addr()
		// Odd trials launch the kernel on a round block (kernels.Mirror's
		// Round) holding the call's base, the live count and the
		// probability, with junk for the rest and in the parameters it
		// replaces: the same draws as the reference's absolute ones.
		call, pnlive, prob, round := d.Call, uint64(nlive), math64(d.Prob), uint64(0)
		if trial%2 == 1 {
			base := e.rng.Uint64N(call + 1)
			w := []uint64{base, uint64(nlive), math64(d.Prob), e.rng.Uint64(), e.rng.Uint64()}
			rb := e.checkBuf(8*kernels.RoundWords, 0, unsafe.Slice((*byte)(unsafe.Pointer(&w[0])), 8*len(w)))
			call, pnlive, prob, round = call-base, e.rng.Uint64(), e.rng.Uint64(), rb.addr()
		}
		if err := Launch(kernels.DrawUniform, grid[0], grid[1], grid[2],
			mir.addr(), mir.addr()+uint64(liveOff), pnlive, d.Seed, call, prob, uint64(capacity), uint64(n),
			o, o+uint64(keyOff), o+uint64(keyOff+8*n), o+uint64(keyOff+16*n), round); err != nil {
			t.Fatal(err)
		}
		e.check(fmt.Sprintf("trial %d draw", trial), out)
	}
}

// alignedBuf is buf with the output 8-byte aligned.
func (e *env) alignedBuf(n int) *buf {
	for {
		if b := e.buf(n); b.off%8 == 0 {
			return b
		}
	}
}

func (e *env) patches(p []kernels.ItemPatch) *Mem {
	m := e.mem(max(len(p), 1) * kernels.ItemPatchSize)
	copy(unsafe.Slice((*kernels.ItemPatch)(unsafe.Pointer(&m.Bytes()[0])), len(p)), p)
	return m
}

func (e *env) lives(p []kernels.LivePatch) *Mem {
	m := e.mem(max(len(p), 1) * kernels.LivePatchSize)
	copy(unsafe.Slice((*kernels.LivePatch)(unsafe.Pointer(&m.Bytes()[0])), len(p)), p)
	return m
}
