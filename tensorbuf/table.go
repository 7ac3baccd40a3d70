package tensorbuf

import (
	"context"
	"fmt"
	"math"
	"sync"
)

// Selector chooses which item a table returns on each sample. Like
// ExportMode, it is a plain value.
type Selector int

// The selectors of Reverb (Uniform to LIFO, MinHeap, MaxHeap) and
// TorchRL's sampling without replacement.
const (
	// Uniform picks every item with the same probability.
	Uniform Selector = iota
	// Prioritized picks item i with probability p_i^a / sum_j p_j^a
	// (a = TableConfig.PriorityExponent), from a sum tree. A priority
	// whose p^a, or the sum with it, would not fit a float64 (it must
	// stay below MaxFloat64*(1-2^-40)) is refused with ErrInvalidArg, so
	// the sums and probabilities stay finite. An item of priority 0 has
	// weight 0 and is not drawn while another item has a positive
	// weight; when every item's weight is 0 (all priorities 0), the table
	// draws uniformly, each item with probability 1/N and importance
	// weight 1, as Reverb's PrioritizedSelector does ("all keys have
	// zero priority so treat as if uniformly sampling"), rather than
	// failing.
	Prioritized
	// FIFO picks the oldest item.
	FIFO
	// LIFO picks the newest item.
	LIFO
	// MinHeap picks the item of the lowest priority (the priority itself,
	// not priority^a), with probability 1, as Reverb's MinHeap: of items
	// of equal priority, the one least recently inserted or given a
	// priority by UpdatePriorities (Reverb breaks ties by its count of
	// inserts and updates). Without MaxTimesSampled or an update, every
	// draw of a sample picks the same item. A loaded checkpoint breaks
	// the ties of its items by insertion order (the order of updates is
	// not saved).
	MinHeap
	// MaxHeap is MinHeap picking the item of the highest priority.
	MaxHeap
	// WithoutReplacement samples without replacement in epochs, as
	// TorchRL's SamplerWithoutReplacement: an epoch begins with the items
	// live at that moment and picks each of them once, uniformly among
	// those not yet picked (probability 1/m with m of them left), so the
	// epoch is a uniformly random permutation; when none is left the next
	// draw begins a new epoch, also within a sample (which may then hold
	// an item twice, once from each epoch). An item inserted mid-epoch
	// waits for the next epoch, and the epoch goes on with the items it
	// has left, so that every item live at an epoch's start is picked
	// once before any is picked again. TorchRL differs here: its sampler
	// draws a fresh permutation of the whole storage whenever the
	// storage's length has changed since the last sample, so items
	// already picked in an epoch can be picked again after an insert. An
	// item removed mid-epoch (Delete, MaxSize, MaxTimesSampled, or its
	// first step overwritten) leaves the epoch. A loaded checkpoint
	// begins a new epoch at its first draw (the epoch's progress is not
	// saved).
	WithoutReplacement
)

// maxSelector is the last valid Selector.
const maxSelector = WithoutReplacement

// String returns the selector's name, such as "prioritized".
func (s Selector) String() string {
	switch s {
	case Uniform:
		return "uniform"
	case Prioritized:
		return "prioritized"
	case FIFO:
		return "fifo"
	case LIFO:
		return "lifo"
	case MinHeap:
		return "min-heap"
	case MaxHeap:
		return "max-heap"
	case WithoutReplacement:
		return "without-replacement"
	}
	return fmt.Sprintf("Selector(%d)", int(s))
}

// TableConfig configures a Table. It is a plain value; NewTable copies it
// (and its RateLimiter).
type TableConfig struct {
	Name     string
	Selector Selector
	// PriorityExponent is the a of Prioritized; 0 is taken as 1 (the
	// zero value's default), and PriorityExponentZero asks for a = 0. It
	// must be finite and at least 0, or PriorityExponentZero.
	PriorityExponent float64
	// Beta is the importance-weight exponent b of Prioritized samples
	// (Batch.Weights); 0 leaves the weights at 1. It must be finite and
	// at least 0. Item i's weight is (N*P(i))^-b normalised by the
	// largest such weight over the whole table, not over the batch, as
	// OpenAI baselines and TorchRL normalise: (P(i)/P_min)^-b, where
	// P_min is the smallest positive probability of any item in the
	// table, so weights lie in (0, 1]. Items of priority 0, which cannot
	// be drawn, are left out of that maximum.
	Beta float64
	// MaxSize bounds the items held; inserting into a full table removes
	// the oldest item first. 0 means unbounded.
	MaxSize int
	// MaxTimesSampled removes an item once it has been sampled that many
	// times. 0 means never.
	MaxTimesSampled int
	// RateLimiter, when set, makes samplers and inserters wait; without
	// one, sampling a table that cannot serve the request fails with
	// ErrEmpty.
	RateLimiter *RateLimiter
	// Seed seeds the table's selector. Uniform, prioritized and
	// without-replacement draws come from Philox4x32-10 keyed by Seed
	// (see "Seeded draws" in the package documentation): the same seed
	// selects the same items on every backend.
	Seed uint64
	// DeviceSelection makes SampleInto select items on the buffer's
	// backend (on the device in cuda builds), from a mirror of the
	// table's items kept in backend memory, so that a sample queues its
	// work without waiting for the device: see ItemSelector. The draws
	// are the same as on the host (same seed, same items), but the
	// batch's L is the table's longest item ever inserted (Len+Pad)
	// rather than the longest drawn, and keys, probabilities and weights
	// come back as tensors in backend memory (Batch.KeyTensor; HostMeta
	// copies them and fills Items from the table). Items sampled this way are not counted in
	// times-sampled. Only Uniform and Prioritized tables without
	// MaxTimesSampled can select on the backend: FIFO, LIFO and
	// MaxTimesSampled need the host to see each draw before the next
	// (as do MinHeap, MaxHeap and WithoutReplacement).
	// NewTable refuses other tables, and backends without ItemSelector
	// (PrioritySelector for Prioritized), with ErrConfig. A Prioritized
	// table keeps a copy of its sum tree on the backend, fed with the
	// weights the host computes on insert and UpdatePriorities, and also
	// by UpdatePrioritiesDevice; its importance weights (Beta > 0) are
	// computed there, with the device's pow on the gpu backend (it may
	// differ from Go's math.Pow in the last bits). Rate
	// limits, canSample checks and batch shapes stay on the host.
	// SampleTransitionsInto still selects on the host (same draws). A
	// checkpoint records it, with the priorities UpdatePrioritiesDevice
	// set (Save waits for the backend to learn them): a loaded table
	// selects on its backend again, and Load fails with ErrConfig when
	// that backend cannot (no ItemSelector or PrioritySelector).
	DeviceSelection bool
}

// PriorityExponentZero, as TableConfig.PriorityExponent, asks a
// Prioritized table for the exponent a = 0: every item then has weight
// p^0 = 1, priority 0 included (Go's math.Pow(0, 0) is 1), so the table
// draws uniformly and every importance weight is 1, as a = 0 means in
// the prioritized experience replay paper. TorchRL's PrioritizedSampler
// does the same: it stores (priority + eps)^alpha, 1 at alpha 0. Reverb
// differs for priority 0: its prioritized.cc maps priority 0 to weight 0
// at every exponent, so with a = 0 its items of priority 0 are not drawn
// while another item has a positive priority. The value 0 cannot ask for
// a = 0: it has always meant 1, the zero value's default. The sentinel
// is a value no schedule computes by mistake (every other negative
// exponent is still refused), and a checkpoint keeps it as it keeps the
// exponent.
const PriorityExponentZero = -math.MaxFloat64

// Item (a plain value) is a sequence of steps of one env row: Len real steps from
// absolute step Start, followed by Pad pad steps when sampled.
type Item struct {
	Row      int
	Start    int64
	Len      int
	Pad      int
	Priority float64
}

type item struct {
	Item
	key uint64
	// w is the slot's weight in a Prioritized table's sum tree (0
	// elsewhere), kept equal to tree.get by setWeight: a sample reads it
	// with the rest of the record instead of a line of the tree's
	// weights.
	w            float64
	timesSampled int
	live         bool
	pos          int   // index in Table.live
	hpos         int   // index in Table.starts[Row]
	prev, next   int32 // insertion order, oldest first; -1 ends
}

// Table holds items over a Buffer's steps and samples them (Reverb's
// model). Several tables can share one buffer. A Table is safe for
// concurrent use.
type Table struct {
	b   *Buffer
	cfg TableConfig
	a   float64

	mu      sync.Mutex
	changed chan struct{} // closed on the next change; nil while nobody waits
	items   []item
	itemMap *itemMapping // the mapping items lives in, if any (see growMapped)
	liveMap *itemMapping // the mapping live lives in, if any
	hot     []hotItem    // a uniform table's items in live's order (see hotItem)
	hotMap  *itemMapping // the mapping hot lives in, if any
	hotOn   bool         // whether hot is kept (keepsHot)
	free    []int32
	live    []int32
	head    int32
	tail    int32
	tree    sumTree
	starts  []startHeap // per row: live items by start, for eviction
	nextKey uint64      // insertions so far
	// gens counts the items each slot has held: a key is gen<<32 | slot,
	// so a key names one item until its slot has been reused 2^32 times.
	gens    []uint32
	maxLen  int
	budget  int64 // samples left before MaxTimesSampled removes all
	inserts int64
	samples int64
	// calls counts the sample calls that drew: call c's draw k is
	// philox.Draw(cfg.Seed, 0, c, k), so a table's draws are a function
	// of its seed and call count alone, the same on every backend.
	calls uint64
	xs    []uint64   // scratch of batched draws
	dev   *devMirror // DeviceSelection's mirror, else nil
	us    []float64  // scratch of batched prioritized draws
	slots []int32
	ws    []float64 // scratch of UpdatePriorities' weights

	// heap orders the items of a MinHeap or MaxHeap table, epoch the
	// epoch of a WithoutReplacement table (nil for other selectors).
	heap  *prioHeap
	epoch *epochSel

	// maxPriority is the largest priority given so far (hasMaxPriority):
	// the priority of items inserted with DefaultPriority.
	maxPriority    float64
	hasMaxPriority bool
}

// NewTable adds a table to the buffer. It fails with ErrConfig for an
// invalid configuration (see TableConfig and RateLimiter) and with
// ErrClosed after Close. It is safe for concurrent use.
func (b *Buffer) NewTable(cfg TableConfig) (*Table, error) {
	if cfg.Name == "" || cfg.Selector < Uniform || cfg.Selector > maxSelector || cfg.MaxSize < 0 || cfg.MaxTimesSampled < 0 ||
		!finiteNonNeg(cfg.PriorityExponent) && cfg.PriorityExponent != PriorityExponentZero || !finiteNonNeg(cfg.Beta) {
		return nil, fmt.Errorf("%w: table %+v", ErrConfig, cfg)
	}
	if rl := cfg.RateLimiter; rl != nil {
		if err := rl.validate(cfg.MaxSize, int64(b.numEnvs)*b.capacity); err != nil {
			return nil, fmt.Errorf("%w: table %q: rate limiter %+v: %s", ErrConfig, cfg.Name, *rl, err)
		}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return nil, fmt.Errorf("%w: NewTable", ErrClosed)
	}
	if _, ok := b.tables[cfg.Name]; ok {
		return nil, fmt.Errorf("%w: %q", ErrTableExists, cfg.Name)
	}
	if cfg.RateLimiter != nil {
		rl := *cfg.RateLimiter
		cfg.RateLimiter = &rl
	}
	t := &Table{
		b:      b,
		cfg:    cfg,
		hotOn:  cfg.Selector == Uniform,
		a:      cfg.PriorityExponent,
		head:   -1,
		tail:   -1,
		starts: make([]startHeap, b.numEnvs),
	}
	switch t.a {
	case 0:
		t.a = 1
	case PriorityExponentZero:
		t.a = 0
	}
	t.newOrderLocked()
	if cfg.DeviceSelection {
		m, err := newDevMirror(b, cfg)
		if err != nil {
			return nil, err
		}
		t.dev = m
	}
	b.tables[cfg.Name] = t
	b.tableList = append(b.tableList, t)
	return t, nil
}

// Table returns the named table, or an error wrapping ErrUnknownTable.
func (b *Buffer) Table(name string) (*Table, error) {
	b.mu.RLock()
	defer b.mu.RUnlock()
	t, ok := b.tables[name]
	if !ok {
		return nil, fmt.Errorf("%w: %q", ErrUnknownTable, name)
	}
	return t, nil
}

// Name returns the table's name.
func (t *Table) Name() string { return t.cfg.Name }

// Buffer returns the buffer whose steps the table's items cover.
func (t *Table) Buffer() *Buffer { return t.b }

// Size returns the number of items in the table.
func (t *Table) Size() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.live)
}

// Insert adds an item and returns its key, waiting for the rate limiter
// up to its Timeout. See InsertContext.
func (t *Table) Insert(it Item) (uint64, error) { return t.InsertContext(context.Background(), it) }

// InsertContext adds an item and returns its key. The item's steps must
// be stored: Start at or after the row's oldest step, Start+Len at or
// before its cursor (ErrItem); Len >= 1, Pad >= 0 and Len+Pad no more
// than the capacity (ErrSequenceLen); a finite Priority >= 0 (or
// DefaultPriority for the table's running maximum), and in a Prioritized
// table one whose Priority^PriorityExponent is finite and keeps the sum
// over the table's items finite (see Prioritized), or ErrInvalidArg. A nil
// ctx is refused with ErrInvalidArg. With a rate
// limiter it waits until inserting is allowed, or fails with
// ErrRateLimited or the context's error. A refused insert changes
// nothing.
func (t *Table) InsertContext(ctx context.Context, it Item) (uint64, error) {
	b := t.b
	if ctx == nil {
		return 0, fmt.Errorf("%w: nil context", ErrInvalidArg)
	}
	if it.Len < 1 || it.Pad < 0 || !finiteNonNeg(it.Priority) && it.Priority != DefaultPriority {
		return 0, fmt.Errorf("%w: item %+v", ErrInvalidArg, it)
	}
	if it.Priority != DefaultPriority {
		if _, err := t.weight(it.Priority); err != nil {
			return 0, err
		}
	}
	if int64(it.Len) > b.capacity || int64(it.Pad) > b.capacity-int64(it.Len) { // no sum: Len+Pad may overflow
		return 0, fmt.Errorf("%w: item of %d+%d steps, capacity %d", ErrSequenceLen, it.Len, it.Pad, b.capacity)
	}
	if it.Row < 0 || it.Row >= b.numEnvs {
		return 0, fmt.Errorf("%w: item row %d of %d", ErrRows, it.Row, b.numEnvs)
	}
	for {
		if err := t.wait(ctx, t.canInsertLocked); err != nil {
			return 0, err
		}
		key, again, err := t.insert(it)
		if !again {
			return key, err
		}
	}
}

// insert adds the item if the rate limiter still allows it (again is
// true when it no longer does).
func (t *Table) insert(it Item) (key uint64, again bool, err error) {
	b := t.b
	b.mu.RLock()
	defer b.mu.RUnlock()
	if b.closed {
		return 0, false, fmt.Errorf("%w: Insert", ErrClosed)
	}
	if it.Start < b.oldest(it.Row) || it.Start > b.cursor[it.Row]-int64(it.Len) {
		return 0, false, fmt.Errorf("%w: item %+v, row %d holds [%d, %d)", ErrItem, it, it.Row, b.oldest(it.Row), b.cursor[it.Row])
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.canInsertLocked(0) {
		return 0, true, nil
	}
	full := t.cfg.MaxSize > 0 && len(t.live) >= t.cfg.MaxSize
	given := it.Priority != DefaultPriority
	if !given {
		it.Priority = t.defaultPriorityLocked()
	}
	var w float64
	if t.cfg.Selector == Prioritized {
		w, _ = t.weight(it.Priority) // checked by InsertContext, or the running maximum
		out := 0.0
		if full {
			out = t.tree.get(int(t.head))
		}
		if !t.fits(w - out) {
			return 0, false, fmt.Errorf("%w: priority %v: the sum of priority^%v over the table would exceed %v",
				ErrInvalidArg, it.Priority, t.a, maxTreeTotal)
		}
	}
	if full {
		t.remove(t.head)
	}
	if given {
		t.notePriorityLocked(it.Priority)
	}
	t.nextKey++
	s := t.alloc()
	t.gens[s]++
	key = uint64(t.gens[s])<<32 | uint64(s)
	t.items[s] = item{Item: it, key: key, live: true, pos: len(t.live), prev: t.tail, next: -1}
	if t.dev != nil {
		t.dev.noteItem(s)
		t.dev.noteLive(len(t.live))
	}
	if len(t.live) == cap(t.live) {
		t.live = growMapped(t.live, &t.liveMap) // a uniform draw reads it at random
	}
	t.live = append(t.live, s)
	if t.keepsHot() {
		t.hotAppend(s)
	}
	if t.tail >= 0 {
		t.items[t.tail].next = s
	} else {
		t.head = s
	}
	t.tail = s
	if t.cfg.Selector == Prioritized {
		t.tree.grow(len(t.items))
		t.setWeight(s, w)
	}
	t.starts[it.Row].push(t.items, startEntry{start: it.Start, slot: s})
	t.orderInsertLocked(s)
	t.maxLen = max(t.maxLen, it.Len+it.Pad)
	if t.cfg.MaxTimesSampled > 0 {
		t.budget += int64(t.cfg.MaxTimesSampled)
	}
	t.inserts++
	t.notifyLocked()
	return key, false, nil
}

// lookup returns the slot of a live item by key. Keys carry their slot in
// their low 32 bits and the slot's generation above, so they need no map.
func (t *Table) lookup(key uint64) (int32, bool) {
	s := int64(key & (1<<32 - 1))
	if s >= int64(len(t.items)) || !t.items[s].live || t.items[s].key != key {
		return 0, false
	}
	return int32(s), true
}

func (t *Table) alloc() int32 {
	if n := len(t.free); n > 0 {
		s := t.free[n-1]
		t.free = t.free[:n-1]
		return s
	}
	if len(t.items) == cap(t.items) {
		t.items = growMapped(t.items, &t.itemMap)
	}
	t.items = append(t.items, item{})
	t.gens = append(t.gens, 0)
	return int32(len(t.items) - 1)
}

// remove takes a live item out of every structure; it panics on a dead
// slot, which only an internal inconsistency can give it.
func (t *Table) remove(s int32) {
	it := &t.items[s]
	if !it.live {
		// Every caller holds a live slot (the head, a row's start heap, a
		// looked-up key, a drawn item): a dead one means the table's
		// structures disagree, and returning would hide it (evictRows would
		// loop forever on its heap).
		panic(fmt.Sprintf("tensorbuf: internal error: Table.remove of dead slot %d", s))
	}
	if t.keepsHot() {
		t.hotRemove(s, it.pos)
	}
	last := t.live[len(t.live)-1]
	t.live[it.pos] = last
	t.items[last].pos = it.pos
	t.live = t.live[:len(t.live)-1]
	if t.dev != nil {
		t.dev.noteLive(it.pos)
		t.dev.noteItem(s) // key 0 and weight 0 in the mirror: stale keys no longer match
	}
	if it.prev >= 0 {
		t.items[it.prev].next = it.next
	} else {
		t.head = it.next
	}
	if it.next >= 0 {
		t.items[it.next].prev = it.prev
	} else {
		t.tail = it.prev
	}
	if t.cfg.Selector == Prioritized {
		t.setWeight(s, 0)
	}
	t.starts[it.Row].removeAt(t.items, it.hpos)
	t.orderRemoveLocked(s)
	if t.cfg.MaxTimesSampled > 0 {
		t.budget -= int64(t.cfg.MaxTimesSampled - it.timesSampled)
	}
	it.live = false
	t.free = append(t.free, s)
	t.notifyLocked()
}

// evictRows removes, for each of the rows about to be written at their
// cursor, the items that start before the step the write overwrites, row
// by row in the order given. The caller holds the buffer's write lock
// and has not yet advanced the cursors.
func (t *Table) evictRows(rows []int, cursor []int64) {
	capacity := t.b.capacity
	locked := false
	for _, r := range rows {
		pos := cursor[r]
		if pos < capacity {
			continue
		}
		if !locked {
			t.mu.Lock()
			locked = true
		}
		h := &t.starts[r]
		for minStart := pos + 1 - capacity; len(*h) > 0 && (*h)[0].start < minStart; {
			t.remove((*h)[0].slot)
		}
	}
	if locked {
		t.mu.Unlock()
	}
}

// UpdatePriorities sets the priorities of items by key (Prioritized
// tables keep them in the sum tree, MinHeap and MaxHeap tables reorder
// their items, each update counting as the item's most recent, in the
// order given; other selectors store them); a key given twice takes its
// last priority. It fails, changing nothing, with
// ErrUnknownKey if any key is not in the table, and with ErrInvalidArg
// for a priority InsertContext would refuse, or, in a Prioritized table,
// when the new priorities together would make the sum of
// priority^PriorityExponent over the table non-finite. It raises the
// table's running maximum priority (see DefaultPriority);
// UpdatePriorities32 takes float32 priorities. It is safe for concurrent
// use.
func (t *Table) UpdatePriorities(keys []uint64, priorities []float64) error {
	return updatePriorities(t, keys, priorities)
}

// maxTreeTotal bounds the sum of a Prioritized table's weights
// priority^a, a hair (2^-40 relative) below MaxFloat64. The sum tree
// (sumtree.go) is 8-ary: every stored running sum adds, left to right, at
// most 8 node sums of the level below, and a table of at most 2^31 slots
// has at most 11 levels, so a weight passes through at most 7*11 = 77
// roundings, each by a relative 2^-53, on its way to any running sum:
// every running sum is within a factor (1+2^-53)^77 < 1+2^-46 of the exact
// sum of its leaves, above or below. With the computed total at most
// maxTreeTotal, the exact total is below maxTreeTotal*(1+2^-46) and no
// running sum exceeds maxTreeTotal*(1+2^-45) < MaxFloat64: no node can
// round up to +Inf, the tree stays exact in the sense of float64 sums,
// and p/total, u*total and the importance weights stay finite.
// TestSumTreeNearMaxTotal checks it at the bound. Checking a change
// against it before making it (total+delta, itself rounded) keeps that
// margin.
const maxTreeTotal = math.MaxFloat64 * (1 - 1.0/(1<<40))

// weight returns priority^a, the sum-tree weight of a priority, or
// ErrInvalidArg when it is not finite (a priority above 1 with a large
// exponent). Other selectors do not use it and accept any finite
// priority.
func (t *Table) weight(p float64) (float64, error) {
	if t.cfg.Selector != Prioritized {
		return p, nil
	}
	w := math.Pow(p, t.a)
	if !(w <= maxTreeTotal) {
		return 0, fmt.Errorf("%w: priority %v: priority^%v = %v exceeds %v", ErrInvalidArg, p, t.a, w, maxTreeTotal)
	}
	return w, nil
}

// setWeight sets slot s's weight in the sum tree and in its record (as
// the tree keeps it: 0 for w <= 0). The caller holds t.mu.
func (t *Table) setWeight(s int32, w float64) {
	t.tree.set(int(s), w)
	t.items[s].w = t.tree.get(int(s))
}

// finiteNonNeg reports whether x is a finite number >= 0 (false for NaN).
func finiteNonNeg(x float64) bool { return x >= 0 && x <= math.MaxFloat64 }

// fits reports whether the sum tree's total, changed by delta, stays at
// most maxTreeTotal. The caller holds t.mu.
func (t *Table) fits(delta float64) bool { return t.tree.total()+delta <= maxTreeTotal }

// SetBeta changes the importance-weight exponent of later samples; beta
// must be finite and at least 0 (ErrInvalidArg otherwise). It is safe for
// concurrent use.
func (t *Table) SetBeta(beta float64) error {
	if !finiteNonNeg(beta) {
		return fmt.Errorf("%w: beta %v", ErrInvalidArg, beta)
	}
	t.mu.Lock()
	t.cfg.Beta = beta
	t.mu.Unlock()
	return nil
}

// Delete removes items by key; unknown keys are skipped.
func (t *Table) Delete(keys ...uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, k := range keys {
		if s, ok := t.lookup(k); ok {
			t.remove(s)
		}
	}
}
