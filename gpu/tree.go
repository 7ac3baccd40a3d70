//go:build trajring_cuda

package gpu

import (
	"fmt"
	"math"

	"github.com/trajring/trajring/kernels"
	"gorgonia.org/tensor"
)

// tree checks a mirror's sum tree and returns its device address.
func (b *Backend) tree(m kernels.Mirror) (uint64, error) {
	t, err := b.arena(m.Tree)
	if err != nil {
		return 0, fmt.Errorf("mirror tree: %w", err)
	}
	if !kernels.TreeLeaves(m.TreeN) || m.TreeN > m.Slots || m.TreeOff%8 != 0 ||
		!kernels.Fits(m.TreeOff, kernels.Tree(m.TreeN).Doubles, 8, t.size) {
		return 0, fmt.Errorf("%w: tree of %d leaves at %d in %d bytes (%d slots)", ErrBounds, m.TreeN, m.TreeOff, t.size, m.Slots)
	}
	return uint64(t.ptr) + uint64(m.TreeOff), nil
}

// RepairTree recomputes a mirror's sum tree from its leaves, one launch
// per level, leaves first (kernels/tree_pull.cu, one thread per group;
// cpu.Backend.RepairTree is the reference): the same running sums and
// minima as the host tree, bit for bit. It queues the launches and
// returns. It is safe for concurrent use.
func (b *Backend) RepairTree(m kernels.Mirror) error {
	err := b.enter()
	if err != nil {
		return err
	}
	defer b.exit()
	if _, _, err := b.mirror(m); err != nil {
		return err
	}
	ta, err := b.tree(m)
	if err != nil {
		return err
	}
	lay := kernels.Tree(m.TreeN)
	for l := range lay.Levels {
		if err := b.launchGrid(kernels.TreePull, lay.Size[l]/8, 1, 1, ta, uint64(m.TreeN), uint64(l), 0); err != nil {
			return err
		}
	}
	return nil
}

// DrawPrioritized selects d.N items from a mirror's sum tree in one
// launch (kernels/draw_prioritized.cu; cpu.Backend.DrawPrioritized is the
// reference), every argument a kernel parameter: the same slots, keys,
// windows and probabilities as the host tree's descent, bit for bit; the
// importance weights use the device's pow, which may differ from Go's
// math.Pow in the last bit (exact when Beta is 0). It is safe for
// concurrent use.
func (b *Backend) DrawPrioritized(d kernels.PrioritizedDraw) error {
	err := b.enterLaunch()
	if err != nil {
		return err
	}
	defer b.exit()
	ia, la, err := b.mirror(d.Mirror)
	if err != nil {
		return err
	}
	ta, err := b.tree(d.Mirror)
	if err != nil {
		return err
	}
	ra, err := b.round(d.Mirror)
	if err != nil {
		return err
	}
	o, err := b.arena(d.Out)
	if err != nil {
		return fmt.Errorf("draw output: %w", err)
	}
	if d.NLive <= 0 || d.NLive > d.Mirror.Slots || d.N < 0 || d.Capacity <= 0 || d.N > math.MaxUint32+1 || !(d.Beta >= 0) || math.IsInf(d.Beta, 0) {
		return fmt.Errorf("%w: %d draws from %d live items of %d slots, capacity %d, beta %v", ErrBounds, d.N, d.NLive, d.Mirror.Slots, d.Capacity, d.Beta)
	}
	if d.WinOff%8 != 0 || d.KeyOff%8 != 0 || d.ProbOff%8 != 0 || d.WeightOff%8 != 0 ||
		!kernels.Fits(d.WinOff, d.N, kernels.WinDescSize, o.size) || !kernels.Fits(d.KeyOff, d.N, 8, o.size) ||
		!kernels.Fits(d.ProbOff, d.N, 8, o.size) || !kernels.Fits(d.WeightOff, d.N, 8, o.size) {
		return fmt.Errorf("%w: %d draws at %d/%d/%d/%d into %d bytes", ErrBounds, d.N, d.WinOff, d.KeyOff, d.ProbOff, d.WeightOff, o.size)
	}
	if d.N == 0 {
		return nil
	}
	out := uint64(o.ptr)
	return b.launchGrid(kernels.DrawPrio, d.N, 1, 1,
		ia, la, uint64(d.NLive), ta, uint64(d.Mirror.TreeN), d.Seed, d.Call, math.Float64bits(d.Beta), uint64(d.Capacity), uint64(d.N),
		out+uint64(d.WinOff), out+uint64(d.KeyOff), out+uint64(d.ProbOff), out+uint64(d.WeightOff), ra)
}

// UpdatePriorities sets the leaf weights of a mirror's sum tree from
// device tensors of keys (uint64) and priorities (float32) of the same
// length, and repairs the tree above them, in one launch of one block for
// up to updateOneMax (4096) updates (kernels/update_one.cu), else three,
// without copying anything to or from the host (kernels/update_claim.cu,
// update_apply.cu, tree_repair.cu; cpu.Backend.UpdatePriorities is the
// reference and gives the rules: last update of a slot wins, keys of no
// live item skipped, invalid priorities ignored): the claims, then the
// winners' leaves and priorities, with the groups above them marked and
// listed in the mirror's update state, then one block that repairs the
// listed groups level by level. The tree is then the one a whole repair
// gives, bit for bit. With more than updateRepairMax updates (most groups
// change anyway) a repair of every level replaces the one block (one
// launch per level). The tensors' memory must be device memory of this
// backend's context (their Uintptr is handed to the kernels; it cannot be
// checked); epoch must exceed every epoch used on the mirror before and
// stay below 2^32 (with a round block, m.Round, epoch is added to the
// block's base epoch on the device). p^a uses the device's pow (exact when a is 1). The
// reference loop, whichever the launches (slot(k) is the slot of the live
// item of key k, else -1):
//
//	for i := range n { // claims: the last update of a slot wins
//		if s := slot(keys[i]); s >= 0 {
//			winners[s] = max(winners[s], epoch<<32|uint64(i+1))
//		}
//	}
//	for i := range n { // applies
//		s, p := slot(keys[i]), float64(prios[i])
//		if s >= 0 && winners[s] == epoch<<32|uint64(i+1) && p >= 0 && p <= math.MaxFloat64 {
//			tree[s], lastPrio[s] = math.Pow(p, a), prios[i] // p itself when a is 1
//			// list the groups above leaf s not yet listed this epoch
//		}
//	}
//	for l := range levels { // the repair, leaves first
//		for _, g := range listed[l] {
//			// recompute group g of level l: its 8 running sums and minimum
//		}
//	}
//
// It is safe for concurrent use.
func (b *Backend) UpdatePriorities(m kernels.Mirror, keys, prios *tensor.Dense, epoch uint64, a float64) error {
	err := b.enterLaunch()
	if err != nil {
		return err
	}
	defer b.exit()
	ia, _, err := b.mirror(m)
	if err != nil {
		return err
	}
	ta, err := b.tree(m)
	if err != nil {
		return err
	}
	w, err := b.arena(m.Winners)
	if err != nil {
		return fmt.Errorf("mirror claims: %w", err)
	}
	ra, err := b.round(m)
	if err != nil {
		return err
	}
	u := kernels.UpdateState(m.Slots, m.TreeN)
	if m.WinnersOff%8 != 0 || !kernels.Fits(m.WinnersOff, u.Bytes, 1, w.size) {
		return fmt.Errorf("%w: update state of %d bytes at %d in %d bytes", ErrBounds, u.Bytes, m.WinnersOff, w.size)
	}
	if keys == nil || prios == nil || keys.Dtype() != tensor.Uint64 || prios.Dtype() != tensor.Float32 ||
		keys.DataSize() != prios.DataSize() || !(a >= 0) || math.IsInf(a, 0) || epoch >= 1<<32 {
		return fmt.Errorf("%w: keys and priorities must be uint64 and float32 tensors of one length (never printed: device memory), a %v, epoch %d", ErrBounds, a, epoch)
	}
	n := int64(keys.DataSize())
	if n == 0 {
		return nil
	}
	wa := uint64(w.ptr) + uint64(m.WinnersOff)
	ka, pa := uint64(keys.Uintptr()), uint64(prios.Uintptr())
	if ka%8 != 0 || pa%4 != 0 {
		// The kernels' typed loads would fault on a GPU with the sticky
		// CUDA_ERROR_MISALIGNED_ADDRESS.
		return fmt.Errorf("%w: keys at %#x or priorities at %#x not aligned to their 8- and 4-byte elements", ErrBounds, ka, pa)
	}
	if n <= min(updateOneMax, updateRepairMax) {
		// One block: claims, applies and the repair of the listed groups,
		// each phase after the last (the three launches below, fused).
		return b.launchGrid(kernels.UpdateOne, 1, 1, 1, ia, uint64(m.TreeN), ka, pa, uint64(n), uint64(m.Slots), wa, epoch, ta, math.Float64bits(a), ra)
	}
	if err := b.launchGrid(kernels.UpdateClaim, n, 1, 1, ia, uint64(m.TreeN), ka, uint64(n), wa, epoch, ra); err != nil {
		return err
	}
	if err := b.launchGrid(kernels.UpdateApply, n, 1, 1, ia, uint64(m.TreeN), ka, pa, uint64(n), uint64(m.Slots), wa, epoch, ta, math.Float64bits(a), ra); err != nil {
		return err
	}
	if n <= updateRepairMax {
		return b.launchGrid(kernels.TreeRepair, 1, 1, 1, ta, uint64(m.TreeN), uint64(m.Slots), wa) // one block
	}
	lay := kernels.Tree(m.TreeN)
	for l := range lay.Levels {
		if err := b.launchGrid(kernels.TreePull, lay.Size[l]/8, 1, 1, ta, uint64(m.TreeN), uint64(l), wa+uint64(u.Counts)); err != nil {
			return err
		}
	}
	return nil
}

// updateRepairMax is the most updates whose tree repair UpdatePriorities
// runs as one block over the listed groups; more (past 4096 updates, most
// groups of the lowest levels change) repair every level with a grid of
// its own.
var updateRepairMax int64 = 4096

// updateOneMax is the most updates UpdatePriorities makes in one launch
// of one block (kernels/update_one.cu: a training batch's priorities),
// which writes what the three launches write, bit for bit; more take the
// three launches (their claims and applies spread over the grid).
var updateOneMax int64 = 4096
