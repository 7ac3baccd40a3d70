//go:build trajring_cuda

package gpu

import (
	"fmt"
	"math"
	"testing"
	"unsafe"

	"github.com/trajring/trajring/kernels"
	"gorgonia.org/tensor"
)

// TestSumTreeMatchesCPU runs a prioritized table's device pipeline on
// both backends from the same random state: leaves patched, the tree
// repaired level by level, prioritized draws, priority updates from
// device tensors (stale keys, repeated keys, invalid priorities) and a
// second repair, comparing the mirror (records, live list, tree, claims)
// and the draw outputs byte for byte, guard bytes included; importance
// weights with Beta > 0, and leaves set to p^a for a != 1, within a
// relative 1e-13 (the device's pow and Go's math.Pow may differ by a
// few ulps: Go's is not correctly rounded).
func TestSumTreeMatchesCPU(t *testing.T) { forGrids(t, testSumTreeMatchesCPU) }

// TestSumTreeUnderRaceExposure runs TestSumTreeMatchesCPU with the
// stand-in in race exposure: every launch's threads in shuffled units of
// one on four host threads, so the update kernels' claims, marks and list
// counts (atomics) and the one-block repair's levels are exercised as a
// GPU would interleave them. Skipped when the whole package already runs
// in race exposure (make test-cuda's second pass) and under -short.
func TestSumTreeUnderRaceExposure(t *testing.T) {
	if m, _ := CurrentStandinMode(); m.Threads > 0 {
		t.Skipf("every test already runs in race exposure (%+v)", m)
	}
	if testing.Short() {
		t.Skip("-short")
	}
	inStandinMode(t, StandinMode{Threads: 4, Chunk: 1, Seed: 11})
	forGrids(t, testSumTreeMatchesCPU)
}

func testSumTreeMatchesCPU(t *testing.T, b *Backend) {
	defer func() { updateRepairMax, updateOneMax = 4096, 4096 }()
	for trial := range 24 {
		p := newPair(t, b, 1300+uint64(trial))
		treeN := int64(8) << p.rng.IntN(10)
		slots := treeN * int64(1+p.rng.IntN(2))
		used := 1 + p.rng.Int64N(treeN)
		nlive := 1 + p.rng.Int64N(used)
		lay := kernels.Tree(treeN)
		itemsOff := int64(8 * p.rng.IntN(3))
		liveOff := itemsOff + slots*kernels.ItemRecSize
		treeOff := (liveOff + slots*kernels.LiveSize + 15) &^ 7
		winOff := treeOff + 8*lay.Doubles + 8
		us := kernels.UpdateState(slots, treeN)
		mir := p.arena(winOff + us.Bytes + 16)
		// The update state starts at 0 (a new mirror is zeroed), the rest
		// random.
		zero := make([]byte, us.Bytes)
		_ = b.Upload(mir.g, winOff, zero)
		_ = p.c.Upload(mir.c, winOff, zero)
		// The lists of groups to repair hold the same groups on both
		// backends, but in the device's order (atomics): compared without.
		lists := [2]int64{winOff + us.Lists, winOff + us.Bytes}
		gm := kernels.Mirror{Items: mir.g, ItemsOff: itemsOff, Live: mir.g, LiveOff: liveOff, Slots: slots,
			Tree: mir.g, TreeOff: treeOff, TreeN: treeN, Winners: mir.g, WinnersOff: winOff}
		cm := gm
		cm.Items, cm.Live, cm.Tree, cm.Winners = mir.c, mir.c, mir.c, mir.c
		var items []kernels.ItemPatch
		var keys []uint64
		for s := range treeN {
			rec := kernels.ItemRec{}
			w := 0.0
			if s < used {
				rec = kernels.ItemRec{Row: p.rng.Int64N(4), Start: p.rng.Int64N(1 << 40), Len: p.rng.Int64N(9), Key: uint64(1+p.rng.IntN(3))<<32 | uint64(s)}
				keys = append(keys, rec.Key)
				switch p.rng.IntN(5) {
				case 0: // zero weight: never drawn
				case 1:
					w = float64(1 + p.rng.IntN(4))
				default:
					w = p.rng.ExpFloat64() * math.Pow(10, float64(p.rng.IntN(7)-3))
				}
			}
			items = append(items, kernels.ItemPatch{Slot: s, Rec: rec, Weight: w})
		}
		if trial%6 == 5 {
			for i := range items {
				items[i].Weight = 0 // total 0: uniform over the live list
			}
		}
		var live []kernels.LivePatch
		for pos := range slots {
			live = append(live, kernels.LivePatch{Pos: pos, Slot: p.rng.Int64N(used)})
		}
		if err := b.PatchItems(gm, items, live); err != nil {
			t.Fatal(err)
		}
		if err := p.c.PatchItems(cm, items, live); err != nil {
			t.Fatal(err)
		}
		repair := func(what string) {
			t.Helper()
			if err := b.RepairTree(gm); err != nil {
				t.Fatal(err)
			}
			if err := p.c.RepairTree(cm); err != nil {
				t.Fatal(err)
			}
			p.sameExcept(fmt.Sprintf("trial %d %s", trial, what), mir, lists)
		}
		repair("repaired tree")
		// A few leaves patched on a consistent tree: PatchItems repairs
		// the groups above them (in its own launch, or in launches of
		// their own past patchRepairMax), giving the tree a whole repair
		// gives.
		for _, limit := range []int64{4096, 3} {
			patchRepairMax = limit
			var some []kernels.ItemPatch
			for _, s := range p.rng.Perm(int(treeN))[:1+p.rng.IntN(min(int(treeN), 40))] {
				some = append(some, kernels.ItemPatch{Slot: int64(s), Rec: items[s].Rec, Weight: float64(p.rng.IntN(3)) * p.rng.Float64()})
			}
			if err := b.PatchItems(gm, some, nil); err != nil {
				t.Fatal(err)
			}
			if err := p.c.PatchItems(cm, some, nil); err != nil {
				t.Fatal(err)
			}
			p.sameExcept(fmt.Sprintf("trial %d tree after %d patches (limit %d)", trial, len(some), limit), mir, lists)
			if err := p.c.RepairTree(cm); err != nil {
				t.Fatal(err)
			}
			p.sameExcept(fmt.Sprintf("trial %d tree after %d patches (limit %d), whole repair on the cpu", trial, len(some), limit), mir, lists)
		}
		patchRepairMax = 4096
		draw := func(what string, beta float64) {
			t.Helper()
			n := p.rng.Int64N(300)
			out := p.arena(8 + 48*n + 16)
			d := kernels.PrioritizedDraw{UniformDraw: kernels.UniformDraw{Mirror: gm, NLive: nlive, Seed: p.rng.Uint64(), Call: p.rng.Uint64(),
				Capacity: 1 + p.rng.Int64N(100), N: n, Out: out.g, WinOff: 8, KeyOff: 8 + 24*n, ProbOff: 8 + 32*n, WeightOff: 8 + 40*n}, Beta: beta}
			if err := b.DrawPrioritized(d); err != nil {
				t.Fatal(err)
			}
			d.Mirror, d.Out = cm, out.c
			if err := p.c.DrawPrioritized(d); err != nil {
				t.Fatal(err)
			}
			if beta == 0 {
				p.same(fmt.Sprintf("trial %d %s draw", trial, what), out)
				return
			}
			got, want := make([]byte, out.n), make([]byte, out.n)
			_ = b.Download(got, out.g, 0)
			_ = p.c.Download(want, out.c, 0)
			wo := 8 + 40*n
			if string(got[:wo]) != string(want[:wo]) || string(got[wo+8*n:]) != string(want[wo+8*n:]) {
				t.Fatalf("trial %d %s draw: windows, keys or probabilities differ", trial, what)
			}
			gw := unsafe.Slice((*float64)(unsafe.Pointer(&got[wo])), n)
			cw := unsafe.Slice((*float64)(unsafe.Pointer(&want[wo])), n)
			for k := range gw {
				if !near(gw[k], cw[k]) {
					t.Fatalf("trial %d %s draw %d: weight %v, cpu %v", trial, what, k, gw[k], cw[k])
				}
			}
		}
		draw("beta 0", 0)
		draw("beta 0.4", 0.4)

		// Updates: live keys, stale keys (another generation, dead slots),
		// repeats (the last wins), invalid priorities (ignored).
		n := 1 + p.rng.IntN(3*int(used))
		uk, up := make([]uint64, n), make([]float32, n)
		for i := range uk {
			uk[i] = keys[p.rng.IntN(len(keys))]
			switch p.rng.IntN(8) {
			case 0:
				uk[i] += 1 << 32
			case 1:
				uk[i] = uint64(p.rng.Int64N(slots)) | 1<<32
			}
			up[i] = float32(p.rng.ExpFloat64())
			switch p.rng.IntN(10) {
			case 0:
				up[i] = float32(math.NaN())
			case 1:
				up[i] = -1
			case 2:
				up[i] = 0
			}
		}
		for ci, c := range []struct {
			a     float64
			limit int64 // updateRepairMax: the one-block repair, or a repair of every level
			one   int64 // updateOneMax: one launch (update_one), or three
		}{{1, 4096, 4096}, {1, 3, 4096}, {0.6, 4096, 4096}, {1, 4096, 0}} {
			if c.one == 0 && trial%3 != 0 {
				continue // the three launches: every third trial
			}
			a := c.a
			updateRepairMax, updateOneMax = c.limit, c.one
			kt := p.arena(8 * int64(n))
			pt := p.arena(4 * int64(n))
			_ = b.Upload(kt.g, 0, unsafe.Slice((*byte)(unsafe.Pointer(&uk[0])), 8*n))
			_ = p.c.Upload(kt.c, 0, unsafe.Slice((*byte)(unsafe.Pointer(&uk[0])), 8*n))
			_ = b.Upload(pt.g, 0, unsafe.Slice((*byte)(unsafe.Pointer(&up[0])), 4*n))
			_ = p.c.Upload(pt.c, 0, unsafe.Slice((*byte)(unsafe.Pointer(&up[0])), 4*n))
			gk, _ := b.Tensor(kt.g, 0, tensor.Uint64, n)
			gp, _ := b.Tensor(pt.g, 0, tensor.Float32, n)
			ck, _ := p.c.Tensor(kt.c, 0, tensor.Uint64, n)
			cp, _ := p.c.Tensor(pt.c, 0, tensor.Float32, n)
			epoch := uint64(1+trial) + 100*uint64(ci)
			if err := b.UpdatePriorities(gm, gk, gp, epoch, a); err != nil {
				t.Fatal(err)
			}
			if err := p.c.UpdatePriorities(cm, ck, cp, epoch, a); err != nil {
				t.Fatal(err)
			}
			if a == 1 {
				// The device repaired the groups above the updated leaves:
				// the tree equals the cpu's, and the one a whole repair
				// gives.
				p.sameExcept(fmt.Sprintf("trial %d updated tree (limit %d, one launch up to %d)", trial, c.limit, c.one), mir, lists)
				if err := p.c.RepairTree(cm); err != nil {
					t.Fatal(err)
				}
				p.sameExcept(fmt.Sprintf("trial %d updated tree (limit %d), whole repair on the cpu", trial, c.limit), mir, lists)
				draw("after updates", 0)
				continue
			}
			// p^a on the device may differ in the last bits: compare the
			// leaves within a relative 1e-13, then make them equal and repair.
			got, want := make([]byte, 8*treeN), make([]byte, 8*treeN)
			_ = b.Download(got, mir.g, treeOff)
			_ = p.c.Download(want, mir.c, treeOff)
			gl := unsafe.Slice((*float64)(unsafe.Pointer(&got[0])), treeN)
			cl := unsafe.Slice((*float64)(unsafe.Pointer(&want[0])), treeN)
			for s := range gl {
				if !near(gl[s], cl[s]) {
					t.Fatalf("trial %d: leaf %d after p^%v: %v, cpu %v", trial, s, a, gl[s], cl[s])
				}
			}
			_ = b.Upload(mir.g, treeOff, want)
			repair("updated tree, a 0.6")
		}
	}
}

// sameExcept is same without the bytes [skip[0], skip[1]).
func (p *pair) sameExcept(what string, a twin, skip [2]int64) {
	p.t.Helper()
	got, want := make([]byte, a.n), make([]byte, a.n)
	if err := p.g.Download(got, a.g, 0); err != nil {
		p.t.Fatal(err)
	}
	if err := p.c.Download(want, a.c, 0); err != nil {
		p.t.Fatal(err)
	}
	copy(got[skip[0]:skip[1]], want[skip[0]:skip[1]])
	if i := firstDiff(got, want); i >= 0 {
		p.t.Fatalf("%s: byte %d of %d: gpu %d, cpu %d", what, i, a.n, got[i], want[i])
	}
}

// firstDiff returns the first index where x and y differ, or -1.
func firstDiff(x, y []byte) int {
	for i := range x {
		if x[i] != y[i] {
			return i
		}
	}
	return -1
}

// near reports whether x and y agree within a relative 1e-13.
func near(x, y float64) bool {
	return x == y || math.Abs(x-y) <= 1e-13*math.Max(math.Abs(x), math.Abs(y))
}
