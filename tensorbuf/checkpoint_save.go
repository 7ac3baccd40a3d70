package tensorbuf

import (
	"fmt"
	"io"
	"slices"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/trajring/trajring/tensorbuf/internal/ckptio"
)

// SnapshotMode says how Save keeps the arenas consistent with the
// metadata it saves while writers keep adding. A plain value.
type SnapshotMode int

// The snapshot modes.
const (
	// SnapshotAuto is SnapshotCopyOnWrite.
	SnapshotAuto SnapshotMode = iota
	// SnapshotCopy copies the stored steps of the arenas, inside the
	// backend, into staging arenas while writers are paused, then lets
	// them go on while the copies are streamed out: the pause is one
	// backend-internal copy of the stored steps, at the cost of arenas as
	// large as the rings for the duration of the save. It fails (ErrBackend) when the backend cannot
	// allocate the copies.
	SnapshotCopy
	// SnapshotLock pauses writers (and samplers, which read the rings)
	// for the whole save: no extra memory, but the pause lasts as long as
	// streaming the arenas out does.
	SnapshotLock
	// SnapshotCopyOnWrite pauses writers only while the host state
	// (cursors, metadata, tables) is copied, then streams the arenas
	// while they go on. Each chunk is read with writers excluded (one
	// chunk's download, a few milliseconds at most), and a writer about
	// to overwrite a step the save has not streamed yet first copies that
	// step's bytes to the host, where the save takes them from: the
	// checkpoint is exactly the cut. The copies are bounded (64 MiB); a
	// writer that would exceed the bound waits for the save to stream
	// past the steps already copied. Copy-on-write saves of one buffer
	// run one at a time.
	SnapshotCopyOnWrite
)

// String returns the mode's name, such as "copy".
func (m SnapshotMode) String() string {
	switch m {
	case SnapshotAuto:
		return "auto"
	case SnapshotCopy:
		return "copy"
	case SnapshotLock:
		return "lock"
	case SnapshotCopyOnWrite:
		return "copy-on-write"
	}
	return fmt.Sprintf("SnapshotMode(%d)", int(m))
}

// SaveOptions configures Save. A plain value.
type SaveOptions struct {
	// Compress compresses every chunk with zstd (its fastest level);
	// chunks that do not shrink are stored raw.
	Compress bool
	// Snapshot says how the arenas are kept consistent (SnapshotAuto by
	// default).
	Snapshot SnapshotMode
	// Report, when not nil, receives figures of the save.
	Report *SaveReport
}

// SaveReport describes a finished save. A plain value.
type SaveReport struct {
	// Pause is how long writers, inserters and samplers were blocked
	// together (with SnapshotCopyOnWrite, writers may also wait for one
	// chunk's download at a time, and copy the steps they overwrite).
	Pause time.Duration
	// Preserved is the bytes writers copied before overwriting steps a
	// copy-on-write save had not streamed yet.
	Preserved int64
	// Copied reports whether the arenas were copied into staging arenas
	// (SnapshotCopy) rather than read under the lock.
	Copied bool
	// Bytes is the size of the checkpoint; RawBytes the size of its
	// payload before compression.
	Bytes, RawBytes int64
	// Duration is the whole save.
	Duration time.Duration
}

// tableSnap is a table's complete state, as saved and loaded.
type tableSnap struct {
	cfg         TableConfig
	items       []item       // every slot, live or not; key/pos/hpos/prev/next are derived
	itemMap     *itemMapping // the mapping a loaded snapshot's items live in, if any
	gens        []uint32
	free, live  []int32
	order       []int32 // live slots, oldest first
	heapLen     []int32 // per row: live items in its start heap
	heap        []int32 // the heaps' slots, row after row, in heap order
	nextKey     uint64
	maxLen      int
	budget      int64
	inserts     int64
	samples     int64
	maxPriority float64
	hasMax      bool
	rng         []byte
	// maps are the anonymous mappings a saved table's large copies live
	// in (offHeap), unmapped by release.
	maps [][]byte
}

// release unmaps the mappings of s's tables' large copies (see offHeap);
// s must not be read afterwards. A loaded snapshot has none.
func (s *bufSnap) release() {
	for i := range s.tables {
		t := &s.tables[i]
		for _, m := range t.maps {
			unmapAnon(m)
			snapUnmapped.Add(1)
		}
		if t.maps != nil {
			t.maps, t.items, t.gens, t.free, t.live, t.order, t.heap = nil, nil, nil, nil, nil, nil, nil
		}
	}
}

// offHeap returns an empty slice of capacity n, in an anonymous mapping
// appended to maps when it takes itemsMapMin bytes or more (as the
// table's own records do), else on the heap. A checkpoint's copy of a
// large table lives only until the table is written: on the heap, a copy
// of a 100M-item table's records (9.6 GB) would also raise the garbage
// collector's heap goal by as much, so that the process could grow by
// twice the copy before it is collected. T must hold no pointers.
func offHeap[T any](n int, maps *[][]byte) []T {
	if size := int64(n) * int64(unsafe.Sizeof(*new(T))); size >= itemsMapMin {
		if b, ok := mapAnon(size); ok {
			snapMapped.Add(1)
			*maps = append(*maps, b)
			return unsafe.Slice((*T)(unsafe.Pointer(unsafe.SliceData(b))), n)[:0]
		}
	}
	return make([]T, 0, n)
}

// snapMapped and snapUnmapped count offHeap's mappings and release's
// unmaps, for tests.
var snapMapped, snapUnmapped atomic.Int64

// cloneOffHeap is slices.Clone through offHeap.
func cloneOffHeap[T any](s []T, maps *[][]byte) []T {
	return append(offHeap[T](len(s), maps), s...)
}

// bufSnap is what Save writes besides the arenas.
type bufSnap struct {
	numEnvs  int
	capacity int64
	fields   []Field
	cursor   []int64
	slots    []ckptio.Span // the slots of the stored steps (storedSlots)
	meta     []uint8       // the metadata of those slots, in order
	stats    Stats
	rng      []byte
	tables   []tableSnap
	// layout is the header's layout byte (layoutLineAligned), or 0 for
	// none: the record arena's layout predates line-aligned records.
	layout uint8
}

// snapshotLocked copies the buffer's host state. The caller holds b.mu
// for writing, so no writer, inserter or sampler runs.
func (b *Buffer) snapshotLocked() (*bufSnap, error) {
	s := &bufSnap{
		numEnvs: b.numEnvs, capacity: b.capacity, fields: b.Fields(),
		cursor: slices.Clone(b.cursor), stats: b.stats, layout: b.layoutByte(),
	}
	s.slots = storedSlots(s.cursor, s.capacity)
	s.meta = make([]uint8, 0, ckptio.SpansLen(s.slots))
	for _, sp := range s.slots {
		s.meta = append(s.meta, b.meta[sp.Off:sp.Off+sp.N]...)
	}
	if err := b.snapDrawsAndTables(s); err != nil {
		return nil, err
	}
	return s, nil
}

// snapshotLocked copies the table's state; the caller holds t.mu. A
// DeviceSelection table first learns the priorities UpdatePrioritiesDevice
// set on the backend (learnLeavesLocked, which waits for it), so that the
// checkpoint holds the priorities the device samples with.
func (t *Table) snapshotLocked() (tableSnap, error) {
	if t.dev != nil {
		if err := t.learnLeavesLocked(); err != nil {
			return tableSnap{}, fmt.Errorf("checkpoint of table %q: %w", t.cfg.Name, err)
		}
	}
	s := tableSnap{
		cfg:     t.cfg,
		heapLen: make([]int32, len(t.starts)),
		nextKey: t.nextKey, maxLen: t.maxLen, budget: t.budget, inserts: t.inserts, samples: t.samples,
		maxPriority: t.maxPriority, hasMax: t.hasMaxPriority,
	}
	if rl := t.cfg.RateLimiter; rl != nil {
		c := *rl
		s.cfg.RateLimiter = &c
	}
	s.items, s.gens = cloneOffHeap(t.items, &s.maps), cloneOffHeap(t.gens, &s.maps)
	t.foldHot(s.items)
	s.free, s.live = cloneOffHeap(t.free, &s.maps), cloneOffHeap(t.live, &s.maps)
	s.order = offHeap[int32](len(t.live), &s.maps)
	for i := t.head; i >= 0; i = t.items[i].next {
		s.order = append(s.order, i)
	}
	s.heap = offHeap[int32](len(t.live), &s.maps)
	for r, h := range t.starts {
		s.heapLen[r] = int32(len(h))
		for _, e := range h {
			s.heap = append(s.heap, e.slot)
		}
	}
	s.rng = marshalDraws(t.calls)
	return s, nil
}

// Save writes a checkpoint of the buffer to w: its field specs and sizes,
// every row's steps and cursor, the cut marks and step types of the host
// metadata, its Stats, the state of its direct samplers' random source,
// and every table (configuration and rate limiter, items, priorities,
// times sampled, limiter counters, key generations, running maximum
// priority and random source). A DeviceSelection table's priorities are
// those its backend samples with: Save first waits for the backend and
// learns the priorities UpdatePrioritiesDevice set there (see
// UpdatePrioritiesDevice). Load restores all of it, so that a
// restored buffer samples exactly what the original would have sampled
// next. Writers (their rows' ownership) are not saved: open new ones on
// the loaded buffer. A Hindsight relabeler lives beside the buffer: save
// it right after with Hindsight.Save and restore it with LoadHindsight
// (NewHindsight refuses a restored table that holds its items).
//
// Only stored steps are written: of each row, the slots of its
// min(cursor, capacity) steps, so that slots never written cost nothing
// and a checkpoint grows with the data rather than with the capacity.
//
// The checkpoint is a consistent cut: every writer is paused at a step
// boundary, and every inserter and sampler is excluded, while the host
// state is copied and the arenas are snapshotted (see SnapshotMode and
// SaveReport.Pause). By default (SnapshotCopyOnWrite) the pause is the
// copy of the host state only: the arenas are streamed while writers go
// on, and the steps they overwrite meanwhile are saved as they were at
// the cut. Arenas are streamed through Backend.Download in
// chunks of 4 MiB, at most three in flight: Save never holds a host copy
// of a whole arena. The container format (chunks, checksums, zstd) is
// tensorbuf/internal/ckptio's; writeSnap says what the sections hold.
//
// A buffer closed before or during the save fails with ErrClosed; a
// write error is returned as it is. Save is safe for concurrent use with
// every other call of the buffer and its tables and writers.
func (b *Buffer) Save(w io.Writer, opts SaveOptions) error {
	if w == nil {
		return fmt.Errorf("%w: Save to a nil writer", ErrInvalidArg)
	}
	if opts.Snapshot < SnapshotAuto || opts.Snapshot > SnapshotCopyOnWrite {
		return fmt.Errorf("%w: snapshot mode %v", ErrInvalidArg, opts.Snapshot)
	}
	cow := opts.Snapshot == SnapshotAuto || opts.Snapshot == SnapshotCopyOnWrite
	if cow {
		b.ckpt.saveMu.Lock()
		defer b.ckpt.saveMu.Unlock()
	}
	start := time.Now()
	var rep SaveReport
	b.mu.Lock()
	locked := true
	unlock := func() {
		if locked {
			b.mu.Unlock()
			locked = false
			rep.Pause = time.Since(start)
		}
	}
	defer unlock()
	if b.closed {
		return fmt.Errorf("%w: Save", ErrClosed)
	}
	snap, err := b.snapshotLocked()
	if err != nil {
		return err
	}
	defer snap.release()
	arenas := make([]Arena, len(b.arenas))
	for i := range b.arenas {
		arenas[i] = b.arenas[i].arena
	}
	download := func(dst []byte, c int, off int64) error {
		if err := b.be.Download(dst, arenas[c], off); err != nil {
			return fmt.Errorf("%w: checkpoint download: %w", ErrBackend, err)
		}
		return nil
	}
	if cow {
		b.startCOWLocked(snap.cursor)
		defer func() {
			if cow {
				b.endCOW()
			}
		}()
		download = b.cowDownload
		unlock()
	} else if opts.Snapshot == SnapshotCopy {
		staged, err := b.stageArenasLocked(snap.slots)
		if err != nil {
			return err
		}
		defer func() {
			for _, a := range staged {
				_ = b.be.Free(a)
			}
		}()
		arenas, rep.Copied = staged, true
		unlock()
	}
	cw, err := ckptio.NewWriter(w, opts.Compress)
	if err != nil {
		return err
	}
	defer cw.Close()
	if err := writeSnap(cw, snap); err != nil {
		return err
	}
	spans := make([][]ckptio.Span, len(arenas))
	for i := range arenas {
		spans[i] = ckptio.ScaleSpans(snap.slots, b.arenas[i].stride)
	}
	if err := cw.StreamSections(ckptio.SecArena, spans, download); err != nil {
		return err
	}
	unlock()
	if err := cw.End(); err != nil {
		return err
	}
	if cow {
		rep.Preserved, cow = b.endCOW(), false
	}
	rep.Bytes, rep.RawBytes, rep.Duration = cw.Written(), cw.Raw(), time.Since(start)
	if opts.Report != nil {
		*opts.Report = rep
	}
	return nil
}

// stageCopySteps bounds the steps of one staging copy (its index list is
// host memory: 8 MiB).
const stageCopySteps = 1 << 20

// stageArenasLocked copies the given slots (the stored steps) of every
// ring, inside the backend, to the same places of a new arena (GatherRows
// of every stored step in order) and waits for the copies. The caller
// holds b.mu for writing.
func (b *Buffer) stageArenasLocked(slots []ckptio.Span) (staged []Arena, err error) {
	defer func() {
		if err != nil {
			for _, a := range staged {
				_ = b.be.Free(a)
			}
			staged = nil
		}
	}()
	cols := make([]Column, len(b.arenas))
	for i, r := range b.arenas {
		a, err := b.be.Alloc(r.arena.Size())
		if err != nil {
			return staged, fmt.Errorf("%w: checkpoint staging copy of ring arena %d (%d bytes): %w", ErrBackend, i, r.arena.Size(), err)
		}
		staged = append(staged, a)
		// A whole step of the arena (a record) is one step of this copy.
		cols[i] = Column{Ring: r.arena, StepBytes: r.stride, Out: a}
	}
	idx := make([]int64, min(ckptio.SpansLen(slots), stageCopySteps))
	for _, sp := range slots {
		for off, end := sp.Off, sp.Off+sp.N; off < end; off += int64(len(idx)) {
			n := min(int64(len(idx)), end-off)
			for i := range n {
				idx[i] = off + i
			}
			for i := range cols {
				cols[i].OutOff = off * cols[i].StepBytes
			}
			if err := b.be.GatherRows(cols, idx[:n]); err != nil {
				return staged, fmt.Errorf("%w: checkpoint staging copy: %w", ErrBackend, err)
			}
		}
	}
	if err := b.be.Sync(); err != nil {
		return staged, fmt.Errorf("%w: checkpoint staging copy: %w", ErrBackend, err)
	}
	return staged, nil
}

// writeSnap writes the header, rows, tables and metadata sections of a
// buffer's checkpoint (format version 3), in this order:
//
//   - the header: the buffer's sizes and field specs, the number of tables,
//     its Stats and its direct samplers' random source, then the layout
//     byte (layoutLineAligned) unless the record arena keeps the packed
//     layout of files written before it (which end without the byte and
//     load with that layout);
//   - the rows: every row's cursor;
//   - one section per table (writeTable), ending with an optional flags
//     byte (tableDeviceSelection): files written before it end without,
//     and load with no flag set;
//   - the metadata mirror, one byte per stored step.
//
// Save then streams one section per ring arena of the buffer's layout
// (planLayout: the packed record arena of the small fields and the
// built-in columns, then one arena per large field in field order; Load
// recomputes the layout from the header's field specs and layout byte),
// and the end.
// The metadata and arena sections hold the stored steps only: row after
// row, the first min(cursor, capacity) slots of the row (storedSlots),
// that is Σ min(cursor, capacity) bytes of metadata and as many records
// of the arena's stride. Version 2 held every slot (capacity slots per
// row, never-written ones as zeros) and is still read.
func writeSnap(cw *ckptio.Writer, s *bufSnap) error {
	h := cw.Section(ckptio.SecHeader, 0)
	h.U64(uint64(s.numEnvs))
	h.U64(uint64(s.capacity))
	h.U32(uint32(len(s.fields)))
	for _, f := range s.fields {
		h.Str(f.Name)
		h.U8(uint8(f.Role))
		h.U8(uint8(f.DType))
		h.U32(uint32(len(f.Shape)))
		for _, d := range f.Shape {
			h.U64(uint64(d))
		}
	}
	h.U32(uint32(len(s.tables)))
	h.I64(s.stats.Steps)
	h.I64(s.stats.Cuts)
	h.I64(s.stats.DroppedTransitions)
	h.Bytes(s.rng)
	if s.layout != 0 {
		h.U8(s.layout)
	}
	if err := h.Close(); err != nil {
		return err
	}
	rows := cw.Section(ckptio.SecRows, 0)
	for _, c := range s.cursor {
		rows.I64(c)
	}
	if err := rows.Close(); err != nil {
		return err
	}
	for i := range s.tables {
		if err := writeTable(cw, uint32(i), &s.tables[i]); err != nil {
			return err
		}
	}
	m := cw.Section(ckptio.SecMeta, 0)
	m.Raw(s.meta)
	return m.Close()
}

// Table flags: a byte that ends a table section, optional (checkpoints
// written before it lack it and load with no flag set).
const (
	// tableDeviceSelection: TableConfig.DeviceSelection.
	tableDeviceSelection = 1
)

// omitTableFlags, set by tests, writes table sections as checkpoints
// written before the flags byte existed.
var omitTableFlags bool

func writeTable(cw *ckptio.Writer, index uint32, t *tableSnap) error {
	s := cw.Section(ckptio.SecTable, index)
	c := &t.cfg
	s.Str(c.Name)
	s.U8(uint8(c.Selector))
	s.F64(c.PriorityExponent)
	s.F64(c.Beta)
	s.U64(uint64(c.MaxSize))
	s.U64(uint64(c.MaxTimesSampled))
	s.U64(c.Seed)
	s.Bool(c.RateLimiter != nil)
	if rl := c.RateLimiter; rl != nil {
		s.U64(uint64(rl.MinSize))
		s.F64(rl.SamplesPerInsert)
		s.F64(rl.ErrorBuffer)
		s.I64(int64(rl.Timeout))
	}
	s.U64(t.nextKey)
	s.U64(uint64(t.maxLen))
	s.I64(t.budget)
	s.I64(t.inserts)
	s.I64(t.samples)
	s.F64(t.maxPriority)
	s.Bool(t.hasMax)
	s.Bytes(t.rng)
	s.U64(uint64(len(t.items)))
	for i := range t.items {
		it := &t.items[i]
		s.U64(uint64(it.Row))
		s.I64(it.Start)
		s.U64(uint64(it.Len))
		s.U64(uint64(it.Pad))
		s.F64(it.Priority)
		s.U64(uint64(it.timesSampled))
		s.Bool(it.live)
		s.U32(t.gens[i])
	}
	for _, list := range [][]int32{t.free, t.live, t.order} {
		s.U64(uint64(len(list)))
		for _, v := range list {
			s.U32(uint32(v))
		}
	}
	for _, n := range t.heapLen {
		s.U32(uint32(n))
	}
	for _, v := range t.heap {
		s.U32(uint32(v))
	}
	// Trailing, optional (absent from checkpoints written before it): the
	// table's flags (tableDeviceSelection).
	var flags uint8
	if c.DeviceSelection {
		flags |= tableDeviceSelection
	}
	if !omitTableFlags {
		s.U8(flags)
	}
	return s.Close()
}

// snapDrawsAndTables adds the buffer's draws and a snapshot of every
// table to s: what checkpoints and file-backed state files both hold. The
// caller holds b.mu.
func (b *Buffer) snapDrawsAndTables(s *bufSnap) error {
	s.rng = marshalBufDraws(b.seed, b.calls.Load())
	for _, t := range b.tableList {
		t.mu.Lock()
		ts, err := t.snapshotLocked()
		t.mu.Unlock()
		if err != nil {
			s.release()
			return err
		}
		s.tables = append(s.tables, ts)
	}
	return nil
}
