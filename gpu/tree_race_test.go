//go:build trajring_cuda

package gpu

import (
	"fmt"
	"testing"
	"unsafe"

	"github.com/trajring/trajring/kernels"
	"gorgonia.org/tensor"
)

// TestUpdateRepairContended: device priority updates that all list
// groups at once (one update per leaf group of a tree of 2^15 leaves, so
// every update appends to the same level's count) repair the tree exactly
// as the cpu does, call after call, in race exposure (four host threads,
// units of one thread) and in order, the first after counts left over by
// a failed repair. A count taken without an atomic add loses entries
// here, and the groups they held go unrepaired. A third run makes the
// updates in one launch of one block (update_one) instead of three.
func TestUpdateRepairContended(t *testing.T) {
	if testing.Short() {
		t.Skip("-short")
	}
	for _, m := range []struct {
		StandinMode
		One bool
	}{{StandinMode{Threads: 4, Chunk: 1, Seed: 5}, false}, {StandinMode{}, false}, {StandinMode{Threads: 4, Chunk: 1, Seed: 6}, true}} {
		t.Run(fmt.Sprintf("threads=%d,one=%v", m.Threads, m.One), func(t *testing.T) {
			inStandinMode(t, m.StandinMode)
			b := newBackend(t)
			defer func(v, o int64) { updateRepairMax, updateOneMax = v, o }(updateRepairMax, updateOneMax)
			// The three launches (their claims and applies race across the
			// grid), and on the last run the one-block launch.
			updateRepairMax, updateOneMax = 1<<20, 0
			if m.One {
				updateOneMax = 1 << 20
			}
			p := newPair(t, b, 77)
			const treeN = 1 << 15
			slots := int64(treeN)
			lay := kernels.Tree(treeN)
			us := kernels.UpdateState(slots, treeN)
			liveOff := slots * kernels.ItemRecSize
			treeOff := liveOff + slots*kernels.LiveSize
			winOff := treeOff + 8*lay.Doubles
			mir := p.arena(winOff + us.Bytes)
			zero := make([]byte, us.Bytes)
			_ = b.Upload(mir.g, winOff, zero)
			_ = p.c.Upload(mir.c, winOff, zero)
			gm := kernels.Mirror{Items: mir.g, Live: mir.g, LiveOff: liveOff, Slots: slots,
				Tree: mir.g, TreeOff: treeOff, TreeN: treeN, Winners: mir.g, WinnersOff: winOff}
			cm := gm
			cm.Items, cm.Live, cm.Tree, cm.Winners = mir.c, mir.c, mir.c, mir.c
			items := make([]kernels.ItemPatch, treeN)
			for s := range items {
				items[s] = kernels.ItemPatch{Slot: int64(s), Rec: kernels.ItemRec{Len: 1, Key: 1<<32 | uint64(s)}, Weight: 1}
			}
			for _, be := range []interface {
				PatchItems(kernels.Mirror, []kernels.ItemPatch, []kernels.LivePatch) error
				RepairTree(kernels.Mirror) error
			}{b, p.c} {
				mm := gm
				if be != b {
					mm = cm
				}
				if err := be.PatchItems(mm, items, nil); err != nil {
					t.Fatal(err)
				}
				if err := be.RepairTree(mm); err != nil {
					t.Fatal(err)
				}
			}
			lists := [2]int64{winOff + us.Lists, winOff + us.Bytes}
			p.sameExcept("patched", mir, lists)
			// Counts left over by a repair that never ran (a failed
			// launch): past its groups on level 0 (that level is then
			// repaired whole, nothing more listed), within them on level
			// 1 (stale entries, valid groups, repaired again).
			stale := []uint32{uint32(lay.Size[0]/8 + 5), 3}
			sb := unsafe.Slice((*byte)(unsafe.Pointer(&stale[0])), 8)
			_ = b.Upload(mir.g, winOff+us.Counts, sb)
			_ = p.c.Upload(mir.c, winOff+us.Counts, sb)
			const n = treeN / 8 // one update per leaf group
			uk, up := make([]uint64, n), make([]float32, n)
			kt, pt := p.arena(8*n), p.arena(4*n)
			gk, _ := b.Tensor(kt.g, 0, tensor.Uint64, n)
			gp, _ := b.Tensor(pt.g, 0, tensor.Float32, n)
			ck, _ := p.c.Tensor(kt.c, 0, tensor.Uint64, n)
			cp, _ := p.c.Tensor(pt.c, 0, tensor.Float32, n)
			for epoch := uint64(1); epoch <= 6; epoch++ {
				for i := range uk {
					uk[i] = 1<<32 | uint64(8*i+p.rng.IntN(8))
					up[i] = float32(1 + p.rng.IntN(1000))
				}
				kb := unsafe.Slice((*byte)(unsafe.Pointer(&uk[0])), 8*n)
				pb := unsafe.Slice((*byte)(unsafe.Pointer(&up[0])), 4*n)
				_ = b.Upload(kt.g, 0, kb)
				_ = p.c.Upload(kt.c, 0, kb)
				_ = b.Upload(pt.g, 0, pb)
				_ = p.c.Upload(pt.c, 0, pb)
				if err := b.UpdatePriorities(gm, gk, gp, epoch, 1); err != nil {
					t.Fatal(err)
				}
				if err := p.c.UpdatePriorities(cm, ck, cp, epoch, 1); err != nil {
					t.Fatal(err)
				}
				p.sameExcept(fmt.Sprintf("update %d", epoch), mir, lists)
			}
		})
	}
}
