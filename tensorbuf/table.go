package tensorbuf

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"time"
)

// Selector chooses which item a table returns on each sample. Like
// ExportMode, it is a plain value.
type Selector int

// The selectors of Reverb.
const (
	// Uniform picks every item with the same probability.
	Uniform Selector = iota
	// Prioritized picks item i with probability p_i^a / sum_j p_j^a
	// (a = TableConfig.PriorityExponent), from a sum tree.
	Prioritized
	// FIFO picks the oldest item.
	FIFO
	// LIFO picks the newest item.
	LIFO
)

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
	}
	return fmt.Sprintf("Selector(%d)", int(s))
}

// RateLimiter paces samplers and inserters of a table as Reverb's
// SampleToInsertRatio limiter does. Let diff = inserts*SamplesPerInsert -
// samples. Sampling waits until the table holds MinSize items and, when
// SamplesPerInsert > 0, until diff-1 >= MinSize*SamplesPerInsert -
// ErrorBuffer; inserting waits while the table holds at least MinSize
// items and diff+SamplesPerInsert > MinSize*SamplesPerInsert + ErrorBuffer.
// So once the table holds MinSize items, samplers may run ErrorBuffer
// samples behind the ratio and inserters ErrorBuffer samples ahead of it;
// ErrorBuffer must be at least SamplesPerInsert, or neither side could
// ever move, and a sample asks for at most 2*ErrorBuffer items at once
// (a larger one is refused with ErrInvalidArg). A RateLimiter is a plain
// value; a table keeps its own copy.
type RateLimiter struct {
	MinSize          int
	SamplesPerInsert float64
	ErrorBuffer      float64
	// Timeout bounds each wait; 0 waits until the context is done.
	Timeout time.Duration
}

// TableConfig configures a Table. It is a plain value; NewTable copies it
// (and its RateLimiter).
type TableConfig struct {
	Name     string
	Selector Selector
	// PriorityExponent is the a of Prioritized; 0 is taken as 1.
	PriorityExponent float64
	// Beta is the importance-weight exponent of Prioritized samples
	// (Batch.Weights); 0 leaves the weights at 1.
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
	// Seed seeds the table's selector.
	Seed uint64
}

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
	key          uint64
	timesSampled int
	live         bool
	pos          int   // index in Table.live
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
	free    []int32
	live    []int32
	head    int32
	tail    int32
	tree    sumTree
	starts  []startHeap // per row: items by start, for eviction
	nextKey uint64      // insertions so far
	// gens counts the items each slot has held: a key is gen<<32 | slot,
	// so a key names one item until its slot has been reused 2^32 times.
	gens    []uint32
	maxLen  int
	budget  int64 // samples left before MaxTimesSampled removes all
	inserts int64
	samples int64
	rng     *rand.Rand
	us      []float64 // scratch of batched prioritized draws
	slots   []int32

	// maxPriority is the largest priority given so far (hasMaxPriority):
	// the priority of items inserted with DefaultPriority.
	maxPriority    float64
	hasMaxPriority bool
}

// NewTable adds a table to the buffer.
func (b *Buffer) NewTable(cfg TableConfig) (*Table, error) {
	if cfg.Name == "" || cfg.Selector < Uniform || cfg.Selector > LIFO || cfg.MaxSize < 0 || cfg.MaxTimesSampled < 0 ||
		cfg.PriorityExponent < 0 || cfg.Beta < 0 || math.IsNaN(cfg.PriorityExponent) || math.IsNaN(cfg.Beta) {
		return nil, fmt.Errorf("%w: table %+v", ErrConfig, cfg)
	}
	if rl := cfg.RateLimiter; rl != nil && (rl.MinSize < 0 || rl.SamplesPerInsert < 0 || rl.ErrorBuffer < 0 || rl.Timeout < 0 ||
		rl.SamplesPerInsert > 0 && rl.ErrorBuffer < rl.SamplesPerInsert) {
		return nil, fmt.Errorf("%w: table %q: rate limiter %+v", ErrConfig, cfg.Name, *rl)
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
		a:      cfg.PriorityExponent,
		head:   -1,
		tail:   -1,
		starts: make([]startHeap, b.numEnvs),
		rng:    rand.New(rand.NewPCG(cfg.Seed, 0x7461626c65)),
	}
	if t.a == 0 {
		t.a = 1
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
// than the capacity (ErrSequenceLen); a finite Priority >= 0, or
// DefaultPriority for the table's running maximum. With a rate
// limiter it waits until inserting is allowed, or fails with
// ErrRateLimited or the context's error.
func (t *Table) InsertContext(ctx context.Context, it Item) (uint64, error) {
	b := t.b
	if it.Len < 1 || it.Pad < 0 || math.IsNaN(it.Priority) || math.IsInf(it.Priority, 0) || it.Priority < 0 && it.Priority != DefaultPriority {
		return 0, fmt.Errorf("%w: item %+v", ErrInvalidArg, it)
	}
	if int64(it.Len)+int64(it.Pad) > b.capacity {
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
	if t.cfg.MaxSize > 0 && len(t.live) >= t.cfg.MaxSize {
		t.remove(t.head)
	}
	it.Priority = t.priorityLocked(it.Priority)
	t.nextKey++
	s := t.alloc()
	t.gens[s]++
	key = uint64(t.gens[s])<<32 | uint64(s)
	t.items[s] = item{Item: it, key: key, live: true, pos: len(t.live), prev: t.tail, next: -1}
	t.live = append(t.live, s)
	if t.tail >= 0 {
		t.items[t.tail].next = s
	} else {
		t.head = s
	}
	t.tail = s
	if t.cfg.Selector == Prioritized {
		t.tree.grow(len(t.items))
		t.tree.set(int(s), math.Pow(it.Priority, t.a))
	}
	t.starts[it.Row].push(startEntry{start: it.Start, slot: s, key: key})
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
	t.items = append(t.items, item{})
	t.gens = append(t.gens, 0)
	return int32(len(t.items) - 1)
}

// remove takes a live item out of every structure.
func (t *Table) remove(s int32) {
	it := &t.items[s]
	if !it.live {
		return
	}
	last := t.live[len(t.live)-1]
	t.live[it.pos] = last
	t.items[last].pos = it.pos
	t.live = t.live[:len(t.live)-1]
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
		t.tree.set(int(s), 0)
	}
	if t.cfg.MaxTimesSampled > 0 {
		t.budget -= int64(t.cfg.MaxTimesSampled - it.timesSampled)
	}
	it.live = false
	t.free = append(t.free, s)
	t.notifyLocked()
}

// evict removes the row's items that start before minStart: their first
// step has been overwritten. The caller holds the buffer's write lock.
func (t *Table) evict(row int, minStart int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	h := &t.starts[row]
	for len(*h) > 0 && (*h)[0].start < minStart {
		e := h.pop()
		if it := &t.items[e.slot]; it.live && it.key == e.key {
			t.remove(e.slot)
		}
	}
}

// UpdatePriorities sets the priorities of items by key (Prioritized
// tables keep them in the sum tree; other selectors store them). It fails
// with ErrUnknownKey, changing nothing, if any key is not in the table,
// and raises the table's running maximum priority (see DefaultPriority).
// UpdatePriorities32 takes float32 priorities.
func (t *Table) UpdatePriorities(keys []uint64, priorities []float64) error {
	return updatePriorities(t, keys, priorities)
}

// SetBeta changes the importance-weight exponent of later samples.
func (t *Table) SetBeta(beta float64) error {
	if beta < 0 || math.IsNaN(beta) {
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

// notifyLocked wakes the goroutines waiting for a change of the table.
// The channel is made only when somebody waits, so changes without
// waiters allocate nothing.
func (t *Table) notifyLocked() {
	if t.changed != nil {
		close(t.changed)
		t.changed = nil
	}
}

func (t *Table) canInsertLocked(int) bool {
	rl := t.cfg.RateLimiter
	if rl == nil || rl.SamplesPerInsert == 0 || len(t.live) < rl.MinSize {
		return true
	}
	diff := float64(t.inserts)*rl.SamplesPerInsert - float64(t.samples)
	return diff+rl.SamplesPerInsert <= float64(rl.MinSize)*rl.SamplesPerInsert+rl.ErrorBuffer
}

// maxBatch bounds the items of one sample, so that sizes computed from
// it cannot overflow.
const maxBatch = 1 << 31

// checkBatch refuses sample sizes that could never be served: a
// samples-per-insert limiter lets samplers run at most 2*ErrorBuffer
// samples ahead of inserters, so a larger batch would wait forever.
func (t *Table) checkBatch(n int) error {
	if n > maxBatch {
		return fmt.Errorf("%w: sample of %d items", ErrInvalidArg, n)
	}
	if rl := t.cfg.RateLimiter; rl != nil && rl.SamplesPerInsert > 0 && float64(n) > 2*rl.ErrorBuffer {
		return fmt.Errorf("%w: a sample of %d items exceeds twice the rate limiter's error buffer (%v) and could never be served",
			ErrInvalidArg, n, rl.ErrorBuffer)
	}
	return nil
}

func (t *Table) canSampleLocked(n int) bool {
	if len(t.live) == 0 || (t.cfg.MaxTimesSampled > 0 && t.budget < int64(n)) {
		return false
	}
	rl := t.cfg.RateLimiter
	if rl == nil {
		return true
	}
	if len(t.live) < max(rl.MinSize, 1) {
		return false
	}
	if rl.SamplesPerInsert == 0 {
		return true
	}
	diff := float64(t.inserts)*rl.SamplesPerInsert - float64(t.samples)
	return diff-float64(n) >= float64(rl.MinSize)*rl.SamplesPerInsert-rl.ErrorBuffer
}

// wait blocks until ok holds (checked under the table's lock), the
// context is done, the limiter's timeout passes or the buffer closes.
// Without a rate limiter it never blocks: it fails with ErrEmpty for a
// sampler that cannot be served.
func (t *Table) wait(ctx context.Context, ok func(n int) bool) error { return t.waitN(ctx, ok, 0) }

func (t *Table) waitN(ctx context.Context, ok func(n int) bool, n int) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("table %q: %w", t.cfg.Name, err)
	}
	var timeout <-chan time.Time
	for {
		t.mu.Lock()
		if t.b.closedFlag.Load() {
			t.mu.Unlock()
			return fmt.Errorf("%w: table %q", ErrClosed, t.cfg.Name)
		}
		if ok(n) {
			t.mu.Unlock()
			return nil
		}
		rl := t.cfg.RateLimiter
		if rl == nil {
			size, budget := len(t.live), t.budget
			t.mu.Unlock()
			return fmt.Errorf("%w: table %q holds %d items (%d samples left), asked for %d", ErrEmpty, t.cfg.Name, size, budget, n)
		}
		if t.changed == nil {
			t.changed = make(chan struct{})
		}
		ch := t.changed
		t.mu.Unlock()
		if timeout == nil && rl.Timeout > 0 {
			timer := time.NewTimer(rl.Timeout)
			defer timer.Stop()
			timeout = timer.C
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("table %q: %w", t.cfg.Name, ctx.Err())
		case <-timeout:
			return fmt.Errorf("%w: table %q after %v", ErrRateLimited, t.cfg.Name, rl.Timeout)
		}
	}
}

// startEntry is an item in a row's eviction heap; entries of removed
// items stay until popped and are recognised by their key.
type startEntry struct {
	start int64
	slot  int32
	key   uint64
}

// startHeap is a binary min-heap of entries by start (hand-written rather
// than container/heap, whose interface boxes every pushed entry).
type startHeap []startEntry

func (h *startHeap) push(e startEntry) {
	*h = append(*h, e)
	a := *h
	for i := len(a) - 1; i > 0; {
		p := (i - 1) / 2
		if a[p].start <= a[i].start {
			break
		}
		a[p], a[i] = a[i], a[p]
		i = p
	}
}

func (h *startHeap) pop() startEntry {
	a := *h
	top := a[0]
	n := len(a) - 1
	a[0] = a[n]
	a = a[:n]
	for i := 0; ; {
		l, m := 2*i+1, i
		if l < n && a[l].start < a[m].start {
			m = l
		}
		if l+1 < n && a[l+1].start < a[m].start {
			m = l + 1
		}
		if m == i {
			break
		}
		a[i], a[m] = a[m], a[i]
		i = m
	}
	*h = a
	return top
}
