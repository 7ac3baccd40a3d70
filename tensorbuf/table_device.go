package tensorbuf

import (
	"fmt"

	"github.com/trajring/trajring/cpu"
	"github.com/trajring/trajring/internal/rawbytes"
	"github.com/trajring/trajring/kernels"
	"gorgonia.org/tensor"
)

// ItemSelector is implemented by backends that select a table's items in
// their own memory (TableConfig.DeviceSelection): the cpu backend with
// plain loops over host arenas (the reference), the gpu backend with
// kernels (kernels/patch_items.cu, kernels/draw_uniform.cu) and the
// window gather reading the drawn windows from device memory, so that a
// uniform sample takes two launches (draw, gather; plus one patch launch
// when items changed since the last sample) and no host synchronisation.
// See kernels.Mirror, kernels.ItemPatch and kernels.UniformDraw for the
// layouts and loops, and cpu.Backend's methods for the reference.
// Implementations must be safe for concurrent use on distinct mirrors and
// outputs.
type ItemSelector interface {
	// PatchItems writes changed item records and live-list entries
	// into a table's mirror (with a sum tree, also the patched leaves,
	// and it repairs the tree above them). Every slot and position of
	// one call is distinct.
	PatchItems(m kernels.Mirror, items []kernels.ItemPatch, live []kernels.LivePatch) error
	// DrawUniform selects d.N items uniformly from a mirror and writes
	// their windows, keys, probabilities and weights (see
	// kernels.UniformDraw).
	DrawUniform(d kernels.UniformDraw) error
	// GatherWindowsAt is Backend.GatherWindows with nwin windows read
	// from backend memory (kernels.WinDesc records, Start already the
	// slot) at byte offset winOff of wins.
	GatherWindowsAt(cols []Column, wins Arena, winOff, nwin, seqLen, capacity int64, mask Arena, maskOff int64) error
}

// PrioritySelector is implemented by backends that also keep a
// prioritized table's sum tree in their memory (the host tree's layout,
// kernels.Tree): patched leaves repaired level by level, prioritized
// draws that descend it exactly as the host tree does, and priority
// updates from tensors in backend memory (Table.UpdatePrioritiesDevice).
// See kernels.PrioritizedDraw and cpu.Backend's methods, the reference.
// Implementations must be safe for concurrent use on distinct mirrors and
// outputs.
type PrioritySelector interface {
	ItemSelector
	// RepairTree recomputes the tree's sums and minima from its leaves.
	RepairTree(m kernels.Mirror) error
	// DrawPrioritized selects d.N items from the tree.
	DrawPrioritized(d kernels.PrioritizedDraw) error
	// UpdatePriorities sets leaves from keys (uint64) and priorities
	// (float32) in backend memory, records the priorities in the
	// mirror's update state and repairs the tree above the leaves set
	// (kernels.UpdateState): last update of a slot wins, unknown keys
	// and invalid priorities are skipped.
	UpdatePriorities(m kernels.Mirror, keys, priorities *tensor.Dense, epoch uint64, a float64) error
}

var (
	_ ItemSelector     = (*cpu.Backend)(nil)
	_ PrioritySelector = (*cpu.Backend)(nil)
)

// devMirror is a table's mirror of its items in backend memory (see
// TableConfig.DeviceSelection): per slot an ItemRec, and the live list,
// in one arena (specs mirrorSpecs, one "step" per slot). Inserts and
// removals only mark what changed (items, lives: each slot and position
// once); the next device selection patches their current values in one
// launch. Guarded by the table's mutex.
type devMirror struct {
	sel      ItemSelector
	prio     PrioritySelector // prioritized tables
	arena    outArena
	treeN    int64     // leaves of the device tree's layout (0: none yet)
	dirty    bool      // a new tree layout: repair it whole
	devSet   bool      // leaves set by UpdatePrioritiesDevice the host tree lacks
	epoch    uint64    // UpdatePrioritiesDevice calls
	leaves   []float64 // scratch of learnLeavesLocked
	prios    []float32
	slots    int64 // slots the arena holds (0 before the first sample)
	full     bool  // patch every slot and position (new arena, failed patch)
	itemMark []bool
	items    []int32
	liveMark []bool
	lives    []int32
	ip       []kernels.ItemPatch // scratch of flush
	lp       []kernels.LivePatch
	meta     metaMirror // the per-step metadata, for transitions (table_transitions_device.go)
	round    outArena   // the round block (table_round.go; allocated by the first BeginRound)
	rec      *roundRec  // the round being recorded, nil for none
}

var mirrorSpecs = []outSpec{
	{name: "items", dtype: Int64, stepBytes: kernels.ItemRecSize},
	{name: "live", dtype: Int32, stepBytes: kernels.LiveSize},
}

// treeSpecs add a prioritized mirror's sum tree (at most 6 float64s per
// slot for a tree of at most as many leaves as slots, 64 or more: see
// kernels.Tree) and its update state (claims, the last priorities
// UpdatePrioritiesDevice set, the groups to repair: kernels.UpdateState).
var treeSpecs = append(append([]outSpec(nil), mirrorSpecs...),
	outSpec{name: "tree", dtype: Float64, stepBytes: 48},
	outSpec{name: "update state", dtype: Int64, stepBytes: kernels.UpdateStepBytes},
)

// metaSpecs lays out a device-selected batch's metadata, one "step" per
// item: the windows the gather reads, then keys, probabilities and
// weights.
var metaSpecs = []outSpec{
	{name: "windows", dtype: Int64, stepBytes: kernels.WinDescSize},
	{name: "keys", dtype: Int64, stepBytes: 8},
	{name: "probabilities", dtype: Float64, stepBytes: 8},
	{name: "weights", dtype: Float64, stepBytes: 8},
}

const (
	metaWins = iota
	metaKeys
	metaProbs
	metaWeights
)

// newDevMirror checks that a table may select on its backend and returns
// its mirror. FIFO and LIFO select by insertion order, and MaxTimesSampled
// removes items as they are drawn: both need the host to know, between
// two draws of one call, what was drawn, so such tables select on the host.
func newDevMirror(b *Buffer, cfg TableConfig) (*devMirror, error) {
	if cfg.Selector != Uniform && cfg.Selector != Prioritized {
		return nil, fmt.Errorf("%w: table %q: DeviceSelection needs a Uniform or Prioritized selector, not %v (FIFO and LIFO select by insertion order on the host)", ErrConfig, cfg.Name, cfg.Selector)
	}
	if cfg.MaxTimesSampled > 0 {
		return nil, fmt.Errorf("%w: table %q: DeviceSelection with MaxTimesSampled (items leave as they are drawn, which the host must see)", ErrConfig, cfg.Name)
	}
	sel, ok := b.be.(ItemSelector)
	if !ok {
		return nil, fmt.Errorf("%w: table %q: DeviceSelection on backend %q, which cannot select items (no ItemSelector)", ErrConfig, cfg.Name, b.be.Name())
	}
	m := &devMirror{sel: sel, arena: outArena{kind: "table mirror"}, round: outArena{kind: "round block"}}
	if cfg.Selector == Prioritized {
		if m.prio, ok = b.be.(PrioritySelector); !ok {
			return nil, fmt.Errorf("%w: table %q: prioritized DeviceSelection on backend %q, which keeps no sum tree (no PrioritySelector)", ErrConfig, cfg.Name, b.be.Name())
		}
	}
	return m, nil
}

// noteItem marks slot s's record changed.
func (m *devMirror) noteItem(s int32) {
	for int(s) >= len(m.itemMark) {
		m.itemMark = append(m.itemMark, false)
	}
	if !m.itemMark[s] {
		m.itemMark[s] = true
		m.items = append(m.items, s)
	}
}

// noteLive marks live-list position pos changed.
func (m *devMirror) noteLive(pos int) {
	for pos >= len(m.liveMark) {
		m.liveMark = append(m.liveMark, false)
	}
	if !m.liveMark[pos] {
		m.liveMark[pos] = true
		m.lives = append(m.lives, int32(pos))
	}
}

// mirror describes the mirror's arenas.
func (m *devMirror) mirror() kernels.Mirror {
	a := m.arena.arena
	k := kernels.Mirror{Items: a, ItemsOff: m.arena.offs[0], Live: a, LiveOff: m.arena.offs[1], Slots: m.slots}
	if m.prio != nil {
		k.Tree, k.TreeOff, k.TreeN, k.Winners, k.WinnersOff = a, m.arena.offs[2], m.treeN, a, m.arena.offs[3]
	}
	return k
}

// flushMirrorLocked brings the mirror up to date with the table: it grows
// the arena to hold every slot (doubling; a new arena is patched whole),
// lays the device tree out for the host tree's leaves, and patches the
// current record (and leaf weight) of every changed slot and the current
// entry of every changed live position in one call, which also repairs
// the tree above the changed leaves (one launch on the gpu backend for up
// to a few thousand patches); a new tree layout is repaired whole. Dead
// slots get a zero record (key 0: their old keys no longer match) and
// weight 0. The caller holds t.mu.
func (t *Table) flushMirrorLocked() error {
	m := t.dev
	specs := mirrorSpecs
	if m.prio != nil {
		specs = treeSpecs
	}
	if need := t.mirrorNeed(); need > m.slots || m.arena.arena == nil {
		if err := t.learnLeavesLocked(); err != nil {
			return err
		}
		slots := max(m.slots, 64)
		for slots < need {
			slots *= 2
		}
		if _, err := m.arena.ensure(t.b.be, specs, slots); err != nil {
			return err
		}
		m.slots, m.full, m.treeN = slots, true, 0
	}
	if m.full {
		for s := range t.items {
			m.noteItem(int32(s))
		}
		for pos := range t.live {
			m.noteLive(pos)
		}
	}
	if n := int64(t.tree.n); m.prio != nil && n != m.treeN {
		// The weights come first in every layout: leaves below the old
		// size keep their place (and any device-set weights); the new
		// ones overlay the old sums and are patched.
		if kernels.Tree(n).Doubles > 6*m.slots || kernels.UpdateState(m.slots, n).Bytes > kernels.UpdateStepBytes*m.slots {
			return fmt.Errorf("%w: a tree of %d leaves does not fit a mirror of %d slots", ErrBackend, n, m.slots)
		}
		for s := m.treeN; s < n; s++ {
			m.noteItem(int32(s))
		}
		m.treeN, m.dirty = n, true
	}
	ip, lp := m.ip[:0], m.lp[:0]
	for _, s := range m.items {
		m.itemMark[s] = false
		p := kernels.ItemPatch{Slot: int64(s)}
		if int(s) < len(t.items) && t.items[s].live {
			it := &t.items[s]
			p.Rec = kernels.ItemRec{Row: int64(it.Row), Start: it.Start, Len: int64(it.Len), Key: it.key}
			if m.prio != nil {
				p.Weight = t.tree.get(int(s))
			}
		}
		ip = append(ip, p)
	}
	for _, pos := range m.lives {
		m.liveMark[pos] = false
		if int(pos) < len(t.live) {
			lp = append(lp, kernels.LivePatch{Pos: int64(pos), Slot: int64(t.live[pos])})
		}
	}
	m.items, m.lives, m.ip, m.lp = m.items[:0], m.lives[:0], ip, lp
	if len(ip)+len(lp) > 0 {
		if err := m.sel.PatchItems(m.mirror(), ip, lp); err != nil {
			m.full = true // what reached the mirror is unknown: patch it whole next time
			return fmt.Errorf("%w: patching the item mirror: %w", ErrBackend, err)
		}
	}
	m.full = false
	if m.dirty && m.treeN > 0 {
		if err := m.prio.RepairTree(m.mirror()); err != nil {
			m.full = true
			return fmt.Errorf("%w: repairing the device sum tree: %w", ErrBackend, err)
		}
		m.dirty = false
	}
	return nil
}

// mirrorNeed returns the slots the mirror must hold: every item slot, and
// a prioritized table's tree leaves.
func (t *Table) mirrorNeed() int64 {
	need := int64(len(t.items))
	if t.dev.prio != nil {
		need = max(need, int64(t.tree.n))
	}
	return need
}

// learnLeavesLocked copies the device tree's leaves into the host tree, and
// the priorities UpdatePrioritiesDevice set into the items and the running
// maximum (waiting for the backend), so that the host knows the priorities
// the device samples with: before the mirror moves to a new arena (whose
// patch would undo them), and before a checkpoint. A slot whose leaf
// differs from the host tree's weight was last set by
// UpdatePrioritiesDevice (the host patched every other leaf with its own
// weight), unless the host changed it since (marked, not yet patched: the
// host's value is the newer). Its priority becomes the float32 the device
// was given and its weight the device's p^a (exactly p with
// PriorityExponent 1; with other exponents the device's pow may differ from
// math.Pow in the last bits). After a failed patch (m.full) the mirror's
// contents are unknown and nothing is learned. The caller holds t.mu.
func (t *Table) learnLeavesLocked() error {
	m := t.dev
	if !m.devSet || m.arena.arena == nil || m.full || m.treeN == 0 {
		return nil
	}
	be := t.b.be
	if err := be.Sync(); err != nil {
		return fmt.Errorf("%w: sync: %w", ErrBackend, err)
	}
	ws := grow(&m.leaves, int(m.treeN))
	ps := grow(&m.prios, int(m.treeN))
	st := m.arena.offs[3]
	if err := be.Download(rawbytes.Of(ws), m.arena.arena, m.arena.offs[2]); err != nil {
		return fmt.Errorf("%w: download: %w", ErrBackend, err)
	}
	if err := be.Download(rawbytes.Of(ps), m.arena.arena, st+kernels.UpdateState(m.slots, m.treeN).Prios); err != nil {
		return fmt.Errorf("%w: download: %w", ErrBackend, err)
	}
	for s := range min(len(ws), len(t.items)) {
		if it := &t.items[s]; it.live && ws[s] != t.tree.get(s) && (s >= len(m.itemMark) || !m.itemMark[s]) {
			t.setWeight(int32(s), ws[s])
			t.setPriorityLocked(int32(s), float64(ps[s]))
			t.notePriorityLocked(it.Priority)
		}
	}
	m.devSet = false
	return nil
}

// releaseMirror frees the mirror's memory (Buffer.Close); the next device
// selection would allocate and patch a new one.
func (m *devMirror) release() {
	_ = m.arena.release()
	m.slots = 0
	_ = m.meta.arena.release()
	m.meta.synced = m.meta.synced[:0]
	_ = m.round.release()
}

// sampleDevLocked selects n items on the backend and gathers them into
// bt: patch the mirror, draw (one launch), gather the windows the draw
// wrote (one launch). The batch's L is the table's longest item (the host
// cannot see what was drawn without waiting for it). The caller holds
// b.mu for reading and t.mu, which sampleDevLocked unlocks, and has checked
// canSampleLocked(n) and the sample's size.
func (t *Table) sampleDevLocked(bt *Batch, n int) error {
	b := t.b
	l := t.maxLen
	if t.dev.rec != nil {
		t.mu.Unlock()
		return fmt.Errorf("%w: table %q: a round records transition samples only, not SampleInto", ErrInvalidArg, t.cfg.Name)
	}
	realloc, err := b.prepare(bt, n, l)
	if err != nil {
		t.mu.Unlock()
		return err
	}
	mrealloc, err := bt.meta.ensure(b.be, metaSpecs, int64(n))
	if err != nil {
		t.mu.Unlock()
		return err
	}
	if err := t.flushMirrorLocked(); err != nil {
		t.mu.Unlock()
		return err
	}
	offs := bt.meta.offs
	d := kernels.UniformDraw{
		Mirror: t.dev.mirror(), NLive: int64(len(t.live)), Seed: t.cfg.Seed, Call: t.calls,
		Prob: 1 / float64(len(t.live)), Capacity: b.capacity, N: int64(n),
		Out: bt.meta.arena, WinOff: offs[metaWins], KeyOff: offs[metaKeys], ProbOff: offs[metaProbs], WeightOff: offs[metaWeights],
	}
	if t.dev.prio != nil {
		err = t.dev.prio.DrawPrioritized(kernels.PrioritizedDraw{UniformDraw: d, Beta: t.cfg.Beta})
	} else {
		err = t.dev.sel.DrawUniform(d)
	}
	if err != nil {
		t.mu.Unlock()
		return fmt.Errorf("%w: device selection: %w", ErrBackend, err)
	}
	t.calls++
	t.samples += int64(n)
	bt.TableSize = len(t.live)
	t.notifyLocked()
	t.mu.Unlock()
	bt.Items, bt.Keys, bt.Probabilities, bt.Weights = bt.Items[:0], bt.Keys[:0], bt.Probabilities[:0], bt.Weights[:0]
	if err := b.gatherAt(bt, t.dev.sel, n, l, realloc); err != nil {
		return err
	}
	if err := bt.metaViews(b.be, n, mrealloc); err != nil {
		return err
	}
	bt.metaT = t
	return nil
}

// gatherAt is gather with the windows the draw wrote to bt.meta.
func (b *Buffer) gatherAt(bt *Batch, sel ItemSelector, n, l int, rebuild bool) error {
	b.batchCols(bt, rebuild)
	if err := sel.GatherWindowsAt(bt.cols, bt.meta.arena, bt.meta.offs[metaWins], int64(n), int64(l), b.capacity,
		bt.out.arena, bt.out.offs[len(b.cols)]); err != nil {
		return fmt.Errorf("%w: gather windows: %w", ErrBackend, err)
	}
	return b.views(bt, n, l, rebuild)
}
