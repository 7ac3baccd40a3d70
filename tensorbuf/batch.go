package tensorbuf

import (
	"fmt"
	"slices"

	"github.com/trajring/trajring/cpu"
	"github.com/trajring/trajring/internal/rawbytes"
	"gorgonia.org/tensor"
)

// outSpec is one output tensor laid out in an outArena: count steps of
// stepBytes each, viewed as [lead..., shape...].
type outSpec struct {
	name      string
	dtype     DType
	shape     []int
	stepBytes int64
}

// outArena is the memory of a result (a Batch, or Transitions and the
// experiences of one export): one backend arena holding every output
// tensor back to back, 16-byte aligned, for up to capSteps steps. Its
// owner frees the arena when the result is dropped (see arenaOwner).
type outArena struct {
	be       Backend
	arena    Arena
	owner    *arenaOwner
	kind     string // "Batch" (when empty) or "Transitions", for messages
	capSteps int64
	offs     []int64
	used     int64 // bytes in use by the current layout
}

// alignOut rounds n up to 16 bytes: every output tensor starts 16-byte
// aligned, so the kernels can move its steps in 16-byte words.
func alignOut(n int64) int64 { return (n + 15) &^ 15 }

// ensure makes room for steps steps of every spec, reallocating (and
// reporting realloc) when the arena is too small or of another backend.
// Tensors handed out over a replaced arena are emptied.
func (o *outArena) ensure(be Backend, specs []outSpec, steps int64) (realloc bool, err error) {
	if o.arena != nil && o.be == be && steps <= o.capSteps && len(o.offs) == len(specs) {
		o.layout(specs, o.capSteps)
		return false, nil
	}
	capSteps := max(steps, o.capSteps)
	if o.be != be {
		capSteps = steps
	}
	var size int64
	for _, s := range specs {
		size = alignOut(size) + capSteps*s.stepBytes
	}
	a, err := allocOutput(be, max(size, 8))
	if err != nil {
		return false, fmt.Errorf("%w: allocating a batch of %d bytes: %w", ErrBackend, size, err)
	}
	_ = o.free(replaced)
	o.adopt(be, a)
	o.capSteps = capSteps
	o.layout(specs, capSteps)
	return true, nil
}

// adopt takes charge of arena a of be: the arena is freed by release, or
// by a cleanup once the result and every tensor over it are unreachable.
func (o *outArena) adopt(be Backend, a Arena) {
	kind := o.kind
	if kind == "" {
		kind = "Batch"
	}
	o.be, o.arena, o.owner = be, a, newOwner(be, a, kind)
}

func (o *outArena) layout(specs []outSpec, capSteps int64) {
	o.offs = o.offs[:0]
	var off int64
	for _, s := range specs {
		off = alignOut(off)
		o.offs = append(o.offs, off)
		off += capSteps * s.stepBytes
	}
	o.used = off
}

// release frees the arena now, emptying every tensor handed out over it
// (see empty). It is idempotent.
func (o *outArena) release() error { return o.free(released) }

// replace is release for a result about to take new memory.
func (o *outArena) replace() error { return o.free(replaced) }

func (o *outArena) free(why reason) error {
	if o.arena == nil {
		return nil
	}
	o.owner.drop(why) // cancels the cleanup: the arena is freed here
	err := o.be.Free(o.arena)
	o.arena, o.owner, o.capSteps, o.offs = nil, nil, 0, o.offs[:0]
	return err
}

// tensor returns a tensor of dtype dt and the given shape viewing the
// arena from byte offset off, owned by the arena's owner.
func (o *outArena) tensor(be Backend, off int64, dt tensor.Dtype, shape ...int) (*tensor.Dense, error) {
	d, err := be.Tensor(o.arena, off, dt, shape...)
	if err != nil {
		return nil, err
	}
	o.owner.adopt(d)
	return d, nil
}

// view returns the tensor of spec i shaped [lead..., spec shape...].
func (o *outArena) view(be Backend, i int, s outSpec, lead ...int) (*tensor.Dense, error) {
	shape := append(append(make([]int, 0, len(lead)+len(s.shape)), lead...), s.shape...)
	return o.tensor(be, o.offs[i], s.dtype.Tensor(), shape...)
}

// hostCopy downloads steps [first, first+count) of every spec into a new
// host arena laid out for count steps.
func (o *outArena) hostCopy(specs []outSpec, first, count int64) (*outArena, *cpu.Backend, error) {
	h := cpu.New()
	if err := o.be.Sync(); err != nil {
		return nil, nil, fmt.Errorf("%w: sync: %w", ErrBackend, err)
	}
	ho := &outArena{kind: o.kind, capSteps: count}
	ho.layout(specs, count)
	a, err := h.AllocOutput(max(ho.used, 8))
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %w", ErrBackend, err)
	}
	raw := a.(*cpu.Arena).Bytes()
	for i, s := range specs {
		n := count * s.stepBytes
		if err := o.be.Download(raw[ho.offs[i]:ho.offs[i]+n], o.arena, o.offs[i]+first*s.stepBytes); err != nil {
			_ = h.Free(a)
			return nil, nil, fmt.Errorf("%w: download: %w", ErrBackend, err)
		}
	}
	ho.adopt(h, a)
	return ho, h, nil
}

// Batch is a sample of sequences: every field shaped [n, L, ...shape]
// (L is the longest item of the batch; a field stacked over its last K
// frames [n, L, K, ...shape], see SequenceOptions.Stack), the built-in
// columns and the mask shaped [n, L]. Its tensors live in the buffer's
// backend memory (device memory in cuda builds); Host returns a host
// copy.
//
// A Batch is reused by the SampleInto calls, which keep its memory when it
// is large enough. Tensors taken from it stay valid, and show each new
// sample, while later calls keep its shape (n and L) and its memory; a
// call that grows the memory, changes the shape or moves the batch to
// another buffer empties them (see Release). A failed call leaves it as it
// was. It is not safe for concurrent use.
//
// Release frees the memory at once. A Batch dropped without Release is
// freed by the garbage collector once neither the Batch nor any tensor
// taken from it is reachable; Release is still the prompt way, and the
// only one for device memory, which the collector does not see.
type Batch struct {
	// Fields holds the user fields by name.
	Fields map[string]*tensor.Dense
	// StepType and NextStepType (int32), Reward and Discount (float32) are
	// the built-in columns; pad steps hold Last, First, 0 and 0.
	StepType, NextStepType, Reward, Discount *tensor.Dense
	// Mask (bool) is true on real steps and false on pad steps.
	Mask *tensor.Dense
	// Items are the sampled items (Row, Start, Len, Pad, Priority); Len
	// real steps are followed by L-Len pad steps in the tensors.
	Items []Item
	// Keys are the items' keys in their table (nil for direct samples).
	Keys []uint64
	// Probabilities are the probabilities with which a table selected the
	// items (empty for direct samples, which draw uniformly); Weights
	// their importance weights, 1 unless the table is Prioritized with
	// Beta > 0: then (N*P(i))^-Beta divided by its largest value over
	// every item of the table (not of the batch), as OpenAI baselines and
	// TorchRL normalise, that is (P(i)/P_min)^-Beta with P_min the
	// smallest positive probability in the table (items of priority 0,
	// never drawn, are left out), so that weights lie in (0, 1].
	Probabilities []float64
	Weights       []float64
	// TableSize is the number of items in the table when sampled.
	TableSize int
	// Valid, for a sample with stacked frames (SequenceOptions.Stack,
	// Table.SampleStackedInto), is false for an item whose first step's
	// stack reaches a step the ring has overwritten (its lost frames are
	// zeros): only table samples can return such an item, and a learner
	// masks it out as it masks TableTransitions.Valid. It is empty for
	// samples without stacking.
	Valid []bool
	// KeyTensor (uint64), ProbabilityTensor and WeightTensor (float64),
	// each shaped [n], hold the keys, probabilities and weights of a
	// sample selected on the backend (TableConfig.DeviceSelection), in
	// its memory (device memory in cuda builds), freed with the batch.
	// Such a sample leaves Items, Keys, Probabilities and Weights empty
	// until HostMeta fills them. They are nil for samples selected on
	// the host.
	KeyTensor, ProbabilityTensor, WeightTensor *tensor.Dense
	// FixedLen, when not 0, fixes L for Table.SampleInto: every sample
	// is padded to FixedLen steps (mask false on the padding, as between
	// items of different lengths), and a table that holds, or ever held,
	// an item longer than FixedLen (Len+Pad) refuses the sample with
	// ErrInvalidArg before drawing. A caller that keeps views of the
	// batch's memory across samples (the C ABI's reusable batches) sets
	// it, so that no sample can change the layout under them.
	FixedLen int

	owner  *Buffer // the buffer whose layout out and specs follow
	out    outArena
	specs  []outSpec
	n, l   int
	cols   []Column
	colsOf Arena // the output arena cols point at (batchCols)
	wins   []Window
	prefix []int64
	draws  []uint64 // scratch of a direct sample's draws
	stack  []int    // K of each stacked user field in the layout, nil for none (stack_sequence.go)
	splan  []int    // scratch: a request's stack plan (stackPlan)
	swins  []Window // scratch: one-step windows of stacked frames
	scols  []Column // scratch: the column of a stacked gather
	meta   outArena // KeyTensor & co. and the drawn windows (table_device.go)
	metaN  int
	metaT  *Table // the table that selected into meta, for HostMeta's Items
}

// Len returns the batch's n (items) and L (steps per item).
func (bt *Batch) Len() (n, l int) { return bt.n, bt.l }

// Release frees the batch's backend memory and empties every tensor it
// handed out: afterwards reading one (Data, At, Get, printing, arithmetic)
// panics with "tensorbuf: tensor used after Batch.Release" or returns an
// error, and its typed slices (Float32s, ...) are empty; it never reaches
// freed memory nor shows other data. Views made from those tensors with
// Slice and slices taken from them earlier are not emptied: do not use
// them after Release either. Release is idempotent, and a released batch
// can be passed to SampleInto again.
func (bt *Batch) Release() error {
	bt.Fields, bt.StepType, bt.NextStepType, bt.Reward, bt.Discount, bt.Mask = nil, nil, nil, nil, nil, nil
	bt.n, bt.l = 0, 0
	bt.retireMeta()
	merr := bt.meta.release()
	if err := bt.out.release(); err != nil {
		return err
	}
	return merr
}

// batchSpecs returns the output specs of a batch of the buffer: user
// fields (stacked over plan[i] frames where plan[i] > 0), the built-in
// columns, then the mask.
func (b *Buffer) batchSpecs(dst []outSpec, plan []int) []outSpec {
	dst = dst[:0]
	for i := range b.cols {
		c := &b.cols[i]
		s := outSpec{name: c.Name, dtype: c.DType, shape: c.Shape, stepBytes: c.stepBytes}
		if i < len(plan) && plan[i] > 0 {
			s.shape = append([]int{plan[i]}, c.Shape...)
			s.stepBytes = int64(plan[i]) * c.stepBytes
		}
		dst = append(dst, s)
	}
	return append(dst, outSpec{name: MaskName, dtype: Bool, stepBytes: 1})
}

// prepare makes room in bt for n items of up to maxL steps, without
// stacked frames.
func (b *Buffer) prepare(bt *Batch, n, maxL int) (realloc bool, err error) {
	return b.preparePlan(bt, n, maxL, nil)
}

// preparePlan is prepare for a sample stacking the fields of plan (see
// stackPlan; nil for none): a batch whose layout follows another plan,
// or another buffer, takes new memory.
func (b *Buffer) preparePlan(bt *Batch, n, maxL int, plan []int) (realloc bool, err error) {
	if bt.owner != b || !sameStack(bt.stack, plan) {
		// A batch last used with another buffer or another stacking: its
		// layout and views describe other fields.
		if err := bt.out.replace(); err != nil {
			return false, fmt.Errorf("%w: %w", ErrBackend, err)
		}
		bt.stack = nil
		if plan != nil {
			bt.stack = slices.Clone(plan)
		}
		bt.specs, bt.Mask, bt.owner, bt.colsOf = b.batchSpecs(bt.specs, bt.stack), nil, b, nil
	}
	realloc, err = bt.out.ensure(b.be, bt.specs, int64(n)*int64(maxL))
	if err != nil {
		return false, err
	}
	if cap(bt.cols) < len(b.cols) {
		bt.cols, bt.colsOf = make([]Column, 0, len(b.cols)), nil // batchCols fills it
	}
	if plan == nil {
		bt.Valid = bt.Valid[:0]
	}
	return realloc, nil
}

// gather reads bt.wins (n windows of L steps) into bt and sets its
// tensors; rebuild forces new tensor views.
func (b *Buffer) gather(bt *Batch, n, l int, rebuild bool) error {
	b.batchCols(bt, rebuild)
	start := b.file.beforeGather(b, bt.wins) // file-backed: prefetch when cold
	if err := b.be.GatherWindows(bt.cols, bt.wins, int64(l), b.capacity, bt.out.arena, bt.out.offs[len(b.cols)]); err != nil {
		return fmt.Errorf("%w: gather windows: %w", ErrBackend, err)
	}
	b.file.afterGather(start, len(bt.wins))
	if err := b.gatherSeqStacks(bt, n, l); err != nil {
		return err
	}
	return b.views(bt, n, l, rebuild)
}

// batchCols points bt.cols at the buffer's rings and the batch's outputs,
// unless they already point at them: the outputs' offsets follow from
// the arena and the buffer's layout (prepare), so the columns stay right
// until prepare reallocates (rebuild). Stacked fields are left out:
// gatherSeqStacks writes them.
func (b *Buffer) batchCols(bt *Batch, rebuild bool) {
	if !rebuild && bt.colsOf != nil && bt.colsOf == bt.out.arena {
		return
	}
	bt.colsOf = bt.out.arena
	bt.cols = bt.cols[:0]
	for i := range b.cols {
		if i < len(bt.stack) && bt.stack[i] > 0 {
			continue
		}
		col := b.ring[i]
		col.Out, col.OutOff, col.Pad = bt.out.arena, bt.out.offs[i], b.cols[i].pad
		bt.cols = append(bt.cols, col)
	}
}

// views sets the batch's tensors over its memory for n items of l steps,
// anew when rebuild is set or the shape changed.
func (b *Buffer) views(bt *Batch, n, l int, rebuild bool) error {
	if !rebuild && bt.n == n && bt.l == l && bt.Mask != nil {
		return nil
	}
	if bt.Fields == nil {
		bt.Fields = make(map[string]*tensor.Dense, b.nUser)
	}
	bt.retire()
	clear(bt.Fields)
	for i, s := range bt.specs {
		d, err := bt.out.view(b.be, i, s, n, l)
		if err != nil {
			return fmt.Errorf("%w: %w", ErrBackend, err)
		}
		bt.set(i, b.nUser, s.name, d)
	}
	bt.n, bt.l = n, l
	return nil
}

// Host returns a copy of the batch in host memory (after waiting for the
// backend), with tensors backed by Go-visible memory.
func (bt *Batch) Host() (*Batch, error) {
	if bt.Mask == nil {
		return nil, fmt.Errorf("%w: empty batch", ErrInvalidArg)
	}
	if err := bt.HostMeta(); err != nil {
		return nil, err
	}
	ho, h, err := bt.out.hostCopy(bt.specs, 0, int64(bt.n)*int64(bt.l))
	if err != nil {
		return nil, err
	}
	c := &Batch{
		Fields:        make(map[string]*tensor.Dense, len(bt.Fields)),
		Items:         append([]Item(nil), bt.Items...),
		Keys:          append([]uint64(nil), bt.Keys...),
		Probabilities: append([]float64(nil), bt.Probabilities...),
		Weights:       append([]float64(nil), bt.Weights...),
		Valid:         append([]bool(nil), bt.Valid...),
		TableSize:     bt.TableSize,
		out:           *ho,
		specs:         bt.specs,
		n:             bt.n,
		l:             bt.l,
	}
	nUser := len(bt.specs) - numBuiltin - 1
	for i, s := range bt.specs {
		d, err := c.out.view(h, i, s, bt.n, bt.l)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrBackend, err)
		}
		c.set(i, nUser, s.name, d)
	}
	return c, nil
}

// retire empties the tensors of the batch's current views, which a new
// layout replaces.
func (bt *Batch) retire() {
	for _, d := range bt.Fields {
		retire(d, replaced)
	}
	for _, d := range []*tensor.Dense{bt.StepType, bt.NextStepType, bt.Reward, bt.Discount, bt.Mask} {
		retire(d, replaced)
	}
}

// set stores output tensor i of the batch layout (user fields, built-in
// columns, mask) in its place.
func (bt *Batch) set(i, nUser int, name string, d *tensor.Dense) {
	switch {
	case i < nUser:
		bt.Fields[name] = d
	case i == nUser+colStepType:
		bt.StepType = d
	case i == nUser+colNextStepType:
		bt.NextStepType = d
	case i == nUser+colReward:
		bt.Reward = d
	case i == nUser+colDiscount:
		bt.Discount = d
	default:
		bt.Mask = d
	}
}

// Field returns the batch tensor of a user field or built-in column by
// name (step_type, next_step_type, reward, discount, mask). An unknown
// name fails with ErrUnknownField, listing the names the batch has, and a
// released or never-filled batch with ErrInvalidArg. Not safe for
// concurrent use with calls that change the batch.
func (bt *Batch) Field(name string) (*tensor.Dense, error) {
	if bt == nil || bt.Mask == nil {
		return nil, fmt.Errorf("%w: field %q of an empty batch", ErrInvalidArg, name)
	}
	var d *tensor.Dense
	switch name {
	case StepTypeName:
		d = bt.StepType
	case NextStepTypeName:
		d = bt.NextStepType
	case RewardName:
		d = bt.Reward
	case DiscountName:
		d = bt.Discount
	case MaskName:
		d = bt.Mask
	default:
		d = bt.Fields[name]
	}
	if d == nil {
		names := append(sortedKeys(bt.Fields), StepTypeName, NextStepTypeName, RewardName, DiscountName, MaskName)
		return nil, fmt.Errorf("%w: %q (the batch has %v)", ErrUnknownField, name, names)
	}
	return d, nil
}

// ItemMask tells an item's own pad steps from the padding a batch adds
// to reach its longest item. A batch of items of different lengths (the
// episodes of an AddEpisode observer, Table.All, Sample) is shaped
// [n, L] with L the longest Len+Pad; Mask is false on every step that is
// not a real step, whichever padding it is. ItemMask returns a host bool
// tensor shaped [n, L] that is true on the item's Len+Pad steps and false
// on the steps after them, so that per step:
//
//	Mask            real step of the item
//	!Mask && ItemMask  pad step of the item (Item.Pad: padded windows of
//	                   the sequence observers)
//	!ItemMask       batch padding (a shorter item than the longest)
//
// Both kinds of padding hold the same values (zeros, step type Last, next
// step type First, reward and discount 0). The information comes from
// Items, which ItemMask reads; it allocates a new tensor on each call.
// An empty or released batch fails with ErrInvalidArg. Not safe for
// concurrent use with calls that change the batch.
func (bt *Batch) ItemMask() (*tensor.Dense, error) {
	if bt == nil || bt.Mask == nil || len(bt.Items) != bt.n {
		return nil, fmt.Errorf("%w: item mask of an empty batch", ErrInvalidArg)
	}
	m := make([]bool, bt.n*bt.l)
	for i, it := range bt.Items {
		k := min(it.Len+it.Pad, bt.l)
		row := m[i*bt.l : (i+1)*bt.l]
		for j := range k {
			row[j] = true
		}
	}
	return tensor.New(tensor.WithShape(bt.n, bt.l), tensor.WithBacking(m)), nil
}

// metaViews sets the batch's KeyTensor, ProbabilityTensor and
// WeightTensor over bt.meta, anew when its memory or n changed.
func (bt *Batch) metaViews(be Backend, n int, rebuild bool) error {
	if !rebuild && bt.metaN == n && bt.KeyTensor != nil {
		return nil
	}
	bt.retireMeta()
	var err error
	offs := bt.meta.offs
	if bt.KeyTensor, err = bt.meta.tensor(be, offs[metaKeys], tensor.Uint64, n); err == nil {
		if bt.ProbabilityTensor, err = bt.meta.tensor(be, offs[metaProbs], tensor.Float64, n); err == nil {
			bt.WeightTensor, err = bt.meta.tensor(be, offs[metaWeights], tensor.Float64, n)
		}
	}
	if err != nil {
		bt.retireMeta()
		return fmt.Errorf("%w: %w", ErrBackend, err)
	}
	bt.metaN = n
	return nil
}

// retireMeta empties and drops the batch's metadata tensors (a host
// selection into the batch, a new layout).
func (bt *Batch) retireMeta() {
	for _, d := range []*tensor.Dense{bt.KeyTensor, bt.ProbabilityTensor, bt.WeightTensor} {
		retire(d, replaced)
	}
	bt.KeyTensor, bt.ProbabilityTensor, bt.WeightTensor, bt.metaN, bt.metaT = nil, nil, nil, 0, nil
}

// HostMeta fills a device-selected batch's Keys, Probabilities and
// Weights from KeyTensor, ProbabilityTensor and WeightTensor, waiting for
// the backend first (for example before UpdatePriorities), and its Items
// from the table by key: Items[i] is the item of Keys[i] as the table
// holds it when HostMeta runs (Row, Start, Len, Pad and Priority, as a
// host-selected sample gives them), or the zero Item (Len 0) when that
// item has left the table since the sample (deleted, evicted or
// replaced). Priority is the host's: priorities set by
// UpdatePrioritiesDevice appear once the host has learned them (see
// UpdatePrioritiesDevice). It reuses the slices' memory (no allocation
// once they are large enough). On a batch selected on the host it does
// nothing. It is not safe for concurrent use with other calls on the
// batch; it is with calls on the table.
func (bt *Batch) HostMeta() error {
	if bt.KeyTensor == nil {
		return nil
	}
	o := &bt.meta
	n := bt.metaN
	keys, probs, weights := grow(&bt.Keys, n), grow(&bt.Probabilities, n), grow(&bt.Weights, n)
	if err := o.download([]hostPart{
		{rawbytes.Of(keys), o.offs[metaKeys]},
		{rawbytes.Of(probs), o.offs[metaProbs]},
		{rawbytes.Of(weights), o.offs[metaWeights]},
	}); err != nil {
		return err
	}
	items := grow(&bt.Items, n)
	if t := bt.metaT; t != nil {
		t.itemsByKey(keys, items, nil)
	}
	return nil
}

// hostPart is one run of an outArena copied to the host: dst from byte
// offset off.
type hostPart struct {
	dst []byte
	off int64
}

// download waits for the backend, then copies each part of o to the
// host: a device-selected sample's metadata for HostMeta.
func (o *outArena) download(parts []hostPart) error {
	if err := o.be.Sync(); err != nil {
		return fmt.Errorf("%w: sync: %w", ErrBackend, err)
	}
	for _, p := range parts {
		if err := o.be.Download(p.dst, o.arena, p.off); err != nil {
			return fmt.Errorf("%w: download: %w", ErrBackend, err)
		}
	}
	return nil
}

// itemsByKey sets items[i] to the item of keys[i] as the table holds it
// now, or the zero Item when it has left the table, and (when steps is not
// nil) steps[i] to the item's first step, or -1.
func (t *Table) itemsByKey(keys []uint64, items []Item, steps []int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for i, k := range keys {
		items[i] = Item{}
		s, ok := t.lookup(k)
		if ok {
			items[i] = t.items[s].Item
		}
		if steps != nil {
			steps[i] = -1
			if ok {
				steps[i] = items[i].Start
			}
		}
	}
}
