package tensorbuf

import (
	"fmt"
	"io"
	"time"

	"github.com/trajring/trajring/tensorbuf/internal/ckptio"
)

// LoadOptions configures Load. A plain value.
type LoadOptions struct {
	// Backend receives the arenas; nil selects DefaultBackend(). Any
	// backend loads any checkpoint: the format holds host bytes.
	Backend Backend
	// Capacity, when not 0, must equal the checkpoint's capacity: a
	// checkpoint is never loaded into rows of another length (ErrConfig).
	Capacity int
}

// Limits of what a checkpoint header may declare (well above any real
// buffer; they bound what is read before the sizes are checked).
const (
	maxCkptFields = 1 << 16
	maxCkptName   = 1 << 12
	maxCkptDims   = 64
	maxCkptTables = 1 << 16
	maxCkptRNG    = 64
	maxCkptSlots  = 1<<31 - 1
)

// ckptHeader is the header section.
type ckptHeader struct {
	numEnvs  int
	capacity int64
	fields   []Field
	nTables  int
	stats    Stats
	rng      []byte
	// packedRecords: no layout byte (a file written before line-aligned
	// records).
	packedRecords bool
	// Derived by check.
	steps, ringBytes int64
	arenaBytes       []int64 // per ring arena (planLayout): the record arena, then the large fields
}

func readHeader(cr *ckptio.Reader) (*ckptHeader, error) {
	s := cr.Section(ckptio.SecHeader, 0)
	h := &ckptHeader{}
	h.numEnvs = s.Count("rows", maxArenaBytes)
	h.capacity = int64(s.Count("capacity", maxArenaBytes))
	nf := int(s.U32())
	if nf > maxCkptFields {
		s.Fail("%d fields", nf)
	}
	for i := 0; i < nf && s.Err() == nil; i++ {
		var f Field
		f.Name = string(s.Bytes(maxCkptName))
		f.Role = Role(s.U8())
		f.DType = DType(s.U8())
		nd := int(s.U32())
		if nd > maxCkptDims {
			s.Fail("field %q of %d dimensions", f.Name, nd)
		}
		for j := 0; j < nd && s.Err() == nil; j++ {
			f.Shape = append(f.Shape, s.Count("dimension", maxArenaBytes))
		}
		h.fields = append(h.fields, f)
	}
	h.nTables = int(s.U32())
	if h.nTables > maxCkptTables {
		s.Fail("%d tables", h.nTables)
	}
	h.stats = Stats{Steps: s.I64(), Cuts: s.I64(), DroppedTransitions: s.I64()}
	h.rng = s.Bytes(maxCkptRNG)
	// The layout byte is optional: a file written before it ends here,
	// and its record arena has the packed layout.
	h.packedRecords = true
	if s.More() {
		if l := s.U8(); l != layoutLineAligned {
			s.Fail("record layout %d", l)
		}
		h.packedRecords = false
	}
	if err := s.Done(); err != nil {
		return nil, err
	}
	if err := h.check(); err != nil {
		return nil, ckptio.Corrupt(ckptio.SecHeader, 0, "%v", err)
	}
	return h, nil
}

// check validates the declared configuration and computes the sizes, as
// New does, without allocating anything large.
func (h *ckptHeader) check() error {
	if h.numEnvs < 1 || h.capacity < 1 {
		return fmt.Errorf("%d rows of %d steps", h.numEnvs, h.capacity)
	}
	if h.stats.Steps < 0 || h.stats.Cuts < 0 || h.stats.DroppedTransitions < 0 {
		return fmt.Errorf("negative stats %+v", h.stats)
	}
	if _, _, err := unmarshalBufDraws(h.rng); err != nil {
		return fmt.Errorf("buffer rng: %v", err)
	}
	probe := &Buffer{numEnvs: h.numEnvs, capacity: h.capacity, byName: map[string]int{}}
	for _, f := range h.fields {
		if err := validField(f); err != nil {
			return err
		}
		if _, dup := probe.byName[f.Name]; dup || isBuiltin(f.Name) {
			return fmt.Errorf("duplicate field name %q", f.Name)
		}
		probe.byName[f.Name] = len(probe.cols)
		probe.cols = append(probe.cols, column{Field: f, stepBytes: int64(f.StepBytes())})
	}
	for _, dt := range []DType{Int32, Int32, Float32, Float32} { // step_type, next_step_type, reward, discount
		probe.cols = append(probe.cols, column{Field: Field{DType: dt}, stepBytes: int64(dt.Size()), builtin: true})
	}
	strides := planLayout(probe.cols, h.packedRecords)
	steps, ring, _, err := probe.sizes(strides)
	if err != nil {
		return err
	}
	h.steps, h.ringBytes = steps, ring
	for _, s := range strides {
		h.arenaBytes = append(h.arenaBytes, steps*s)
	}
	return nil
}

// maxCursor bounds a saved cursor, so that cursor+capacity cannot
// overflow.
const maxCursor = 1 << 62

func readRows(cr *ckptio.Reader, numEnvs int) ([]int64, error) {
	s := cr.Section(ckptio.SecRows, 0)
	var cursors []int64
	for r := 0; r < numEnvs && s.Err() == nil; r++ {
		c := s.I64()
		if c < 0 || c > maxCursor {
			s.Fail("row %d: cursor %d", r, c)
		}
		cursors = append(cursors, c)
	}
	if err := s.Done(); err != nil {
		return nil, err
	}
	return cursors, nil
}

func readTable(cr *ckptio.Reader, index uint32, numEnvs int) (*tableSnap, error) {
	s := cr.Section(ckptio.SecTable, index)
	t := &tableSnap{}
	c := &t.cfg
	c.Name = string(s.Bytes(maxCkptName))
	c.Selector = Selector(s.U8())
	c.PriorityExponent = s.F64()
	c.Beta = s.F64()
	c.MaxSize = s.Count("MaxSize", maxArenaBytes)
	c.MaxTimesSampled = s.Count("MaxTimesSampled", maxArenaBytes)
	c.Seed = s.U64()
	if s.Bool() {
		c.RateLimiter = &RateLimiter{
			MinSize: s.Count("MinSize", maxArenaBytes), SamplesPerInsert: s.F64(), ErrorBuffer: s.F64(),
			Timeout: time.Duration(s.I64()),
		}
	}
	t.nextKey = s.U64()
	t.maxLen = s.Count("maxLen", maxArenaBytes)
	t.budget, t.inserts, t.samples = s.I64(), s.I64(), s.I64()
	t.maxPriority = s.F64()
	t.hasMax = s.Bool()
	t.rng = s.Bytes(maxCkptRNG)
	n := s.Count("items", maxCkptSlots)
	// Nothing is allocated from a declared count: slices grow with the
	// records actually read, which the checksums vouch for.
	for i := 0; i < n && s.Err() == nil; i++ {
		var it item
		it.Row = s.Count("row", uint64(numEnvs-1))
		it.Start = s.I64()
		it.Len = s.Count("length", maxArenaBytes)
		it.Pad = s.Count("pad", maxArenaBytes)
		it.Priority = s.F64()
		it.timesSampled = s.Count("times sampled", maxArenaBytes)
		it.live = s.Bool()
		if len(t.items) == cap(t.items) {
			t.items = growMapped(t.items, &t.itemMap) // a large table loads into its mapping
		}
		t.items = append(t.items, it)
		t.gens = append(t.gens, s.U32())
	}
	for _, list := range []*[]int32{&t.free, &t.live, &t.order} {
		k := s.Count("list", uint64(len(t.items)))
		for i := 0; i < k && s.Err() == nil; i++ {
			v := s.U32()
			if int64(v) >= int64(len(t.items)) {
				s.Fail("slot %d of %d", v, len(t.items))
			}
			*list = append(*list, int32(v))
		}
	}
	total := 0
	for r := 0; r < numEnvs && s.Err() == nil; r++ {
		k := int(s.U32())
		if k > len(t.live) || total+k > len(t.live) {
			s.Fail("row %d: start heap of %d items", r, k)
		}
		total += k
		t.heapLen = append(t.heapLen, int32(k))
	}
	for i := 0; i < total && s.Err() == nil; i++ {
		v := s.U32()
		if int64(v) >= int64(len(t.items)) {
			s.Fail("slot %d of %d", v, len(t.items))
		}
		t.heap = append(t.heap, int32(v))
	}
	// The flags byte is optional: a checkpoint written before it ends
	// here, and its tables selected on the host.
	if s.More() {
		flags := s.U8()
		if flags&^tableDeviceSelection != 0 {
			s.Fail("table flags %#x", flags)
		}
		c.DeviceSelection = flags&tableDeviceSelection != 0
	}
	if err := s.Done(); err != nil {
		return nil, err
	}
	return t, nil
}

// Load reads a checkpoint written by Save (format version 3, or version
// 2 of earlier builds) and returns the buffer it holds, with its tables,
// on opts.Backend: the restored buffer and tables continue exactly where
// the saved ones were (see Save), and sample exactly what they would have
// sampled next. It opens no writer.
//
// A file that is not a checkpoint, of another format version, truncated
// or altered anywhere (every chunk is checksummed) fails with an error
// wrapping ErrCorrupt that names the section (a truncated one wraps
// io.EOF or io.ErrUnexpectedEOF too); a read that fails otherwise
// returns the reader's error wrapped, without ErrCorrupt, since it says
// nothing about the checkpoint; a checkpoint whose capacity differs from
// opts.Capacity, whose buffer does not fit in the memory
// available, or that holds a DeviceSelection table the backend cannot
// select for (no ItemSelector, or no PrioritySelector for a Prioritized
// table), fails with ErrConfig. Nothing large is allocated before the
// header has been checked: the arenas are allocated by New from the
// verified header's sizes (New checks them against the memory available),
// and every other structure grows with the data actually read. Load
// reads until the end section and not beyond it. It is safe for
// concurrent use.
func Load(r io.Reader, opts LoadOptions) (*Buffer, error) {
	if r == nil {
		return nil, fmt.Errorf("%w: Load from a nil reader", ErrInvalidArg)
	}
	cr, err := ckptio.NewReader(r)
	if err != nil {
		return nil, err
	}
	defer cr.Close()
	h, err := readHeader(cr)
	if err != nil {
		return nil, err
	}
	if opts.Capacity != 0 && int64(opts.Capacity) != h.capacity {
		return nil, fmt.Errorf("%w: the checkpoint's rows hold %d steps, LoadOptions.Capacity asks %d: a checkpoint loads only at its own capacity",
			ErrConfig, h.capacity, opts.Capacity)
	}
	b, err := New(Config{NumEnvs: h.numEnvs, Capacity: int(h.capacity), Fields: h.fields, Backend: opts.Backend,
		packedRecords: h.packedRecords})
	if err != nil {
		return nil, fmt.Errorf("checkpoint: %w", err)
	}
	if err := b.restore(cr, h); err != nil {
		_ = b.Close()
		return nil, err
	}
	return b, nil
}

// canSelectOnBackend fails with ErrConfig when the buffer's backend cannot
// select the items of a DeviceSelection table (no ItemSelector, or no
// PrioritySelector for a Prioritized one): a table saved selecting on its
// backend is loaded selecting on the backend too, or not at all, rather
// than silently selecting on the host.
func (b *Buffer) canSelectOnBackend(cfg TableConfig) error {
	_, items := b.be.(ItemSelector)
	_, prio := b.be.(PrioritySelector)
	if !items || (cfg.Selector == Prioritized && !prio) {
		return fmt.Errorf("%w: checkpoint table %q selects on its backend (TableConfig.DeviceSelection), which backend %q cannot (no ItemSelector or PrioritySelector): load it on a backend that can, such as the cpu or gpu backend",
			ErrConfig, cfg.Name, b.be.Name())
	}
	return nil
}

// restoreRowsAndTables restores what checkpoints and file-backed state
// files share, in their order: the draws and statistics of the header,
// the rows' cursors and the tables.
func (b *Buffer) restoreRowsAndTables(cr *ckptio.Reader, h *ckptHeader) error {
	seed, calls, _ := unmarshalBufDraws(h.rng) // checked by readHeader
	b.seed = seed
	b.calls.Store(calls)
	b.stats = h.stats
	cursors, err := readRows(cr, b.numEnvs)
	if err != nil {
		return err
	}
	copy(b.cursor, cursors)
	for i := range h.nTables {
		ts, err := readTable(cr, uint32(i), b.numEnvs)
		if err != nil {
			return err
		}
		if ts.cfg.DeviceSelection {
			if err := b.canSelectOnBackend(ts.cfg); err != nil {
				return err
			}
		}
		t, err := b.NewTable(ts.cfg)
		if err != nil {
			return ckptio.Corrupt(ckptio.SecTable, uint32(i), "%v", err)
		}
		if err := t.install(ts); err != nil {
			return ckptio.Corrupt(ckptio.SecTable, uint32(i), "table %q: %v", ts.cfg.Name, err)
		}
	}
	return nil
}

// restore fills a new buffer from the sections after the header.
func (b *Buffer) restore(cr *ckptio.Reader, h *ckptHeader) error {
	if err := b.restoreRowsAndTables(cr, h); err != nil {
		return err
	}
	// Version 3 holds the stored steps' slots, version 2 every slot.
	slots := storedSlots(b.cursor, b.capacity)
	if cr.Version() == ckptio.VersionAll {
		slots = []ckptio.Span{{Off: 0, N: int64(len(b.meta))}}
	}
	if err := b.readMeta(cr, slots); err != nil {
		return err
	}
	if err := b.readArenas(cr, slots); err != nil {
		return err
	}
	return cr.End()
}

// readMeta reads the metadata of the given slots (the section holds
// theirs, in order) and checks every byte of the mirror: stored steps
// have valid step types and known bits, slots not yet written are 0.
func (b *Buffer) readMeta(cr *ckptio.Reader, slots []ckptio.Span) error {
	var stored, raw []byte
	size, walk := ckptio.SpansLen(slots), ckptio.NewSpanWalk(slots)
	off := int64(0)
	for {
		p, last, err := cr.Next(ckptio.SecMeta, 0, &stored, &raw)
		if err != nil {
			return err
		}
		if int64(len(p)) > size-off {
			return ckptio.Corrupt(ckptio.SecMeta, 0, "more than the %d bytes of %d steps", size, size)
		}
		_ = walk.Next(int64(len(p)), func(at, lo, hi int64) error {
			copy(b.meta[at:at+hi-lo], p[lo:hi])
			return nil
		})
		off += int64(len(p))
		if last {
			break
		}
	}
	if off != size {
		return ckptio.Corrupt(ckptio.SecMeta, 0, "%d bytes for %d steps", off, size)
	}
	for r := range b.numEnvs {
		old, cur := b.oldest(r), b.cursor[r]
		for i := range b.capacity {
			m := b.meta[int64(r)*b.capacity+i]
			pos := i // the step in slot i, if any: the one in [old, cur) congruent to i
			if cur > b.capacity {
				pos = old + (i-old%b.capacity+b.capacity)%b.capacity
			}
			if pos >= cur {
				if m != 0 {
					return ckptio.Corrupt(ckptio.SecMeta, 0, "row %d: slot %d is not written but holds %#x", r, i, m)
				}
				continue
			}
			if m&^(metaStepMask|metaNextMask|metaDiscZero|metaCut) != 0 || m&metaStepMask > 2 || (m&metaNextMask)>>metaNextShift > 2 {
				return ckptio.Corrupt(ckptio.SecMeta, 0, "row %d: step %d: metadata %#x", r, pos, m)
			}
		}
	}
	return nil
}

// hostArena is an arena in host memory that exposes its bytes, as the
// cpu backend's arenas do (cpu.Arena.Bytes). Load reads such arenas in
// place (ckptio.Reader.ReadSpansInto) instead of through Backend.Upload.
type hostArena interface {
	Bytes() []byte
}

// loadViaUpload, set by tests, loads host arenas as device ones.
var loadViaUpload bool

// readArenas reads one section per arena, holding the bytes of the given
// slots: straight into the arena's memory when the backend's arenas are
// host memory (hostArena), else chunk by chunk through Upload, reading
// the next chunk while the previous one uploads.
func (b *Buffer) readArenas(cr *ckptio.Reader, slots []ckptio.Span) error {
	for c := range b.arenas {
		a := b.arenas[c].arena
		spans := ckptio.ScaleSpans(slots, b.arenas[c].stride)
		var err error
		if h, ok := a.(hostArena); ok && int64(len(h.Bytes())) == a.Size() && !loadViaUpload {
			err = cr.ReadSpansInto(ckptio.SecArena, uint32(c), h.Bytes(), spans)
		} else {
			err = cr.ReadSpans(ckptio.SecArena, uint32(c), spans, func(at int64, p []byte) error {
				if err := b.be.Upload(a, at, p); err != nil {
					return fmt.Errorf("%w: checkpoint upload: %w", ErrBackend, err)
				}
				return nil
			})
		}
		if err != nil {
			return err
		}
	}
	if err := b.be.Sync(); err != nil {
		return fmt.Errorf("%w: checkpoint upload: %w", ErrBackend, err)
	}
	return nil
}
