package tensorbuf

import (
	"fmt"
	"math/bits"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/trajring/trajring/cpu"
	"gorgonia.org/tensor"
)

// Config configures a Buffer. It is a plain value; New copies what it keeps.
type Config struct {
	// NumEnvs is the number of env rows; each row is its own time axis.
	NumEnvs int
	// Capacity is the number of steps each row keeps; the oldest step of a
	// full row is overwritten by the next add.
	Capacity int
	// Fields are the per-step tensors besides the built-in columns
	// step_type, next_step_type, reward and discount.
	Fields []Field
	// Backend moves the bytes; nil selects DefaultBackend().
	Backend Backend
	// Seed seeds the random choices of the buffer's direct samplers.
	Seed uint64
	// Dir, when not empty, makes the buffer file-backed (docs/files.md):
	// its rings and step metadata are shared mappings of files in this
	// directory (created if missing; one holding a buffer already is
	// refused, see Open), so a buffer may exceed the host's memory and
	// outlive its process: Sync makes its state durable and Open reopens
	// it. It needs the cpu backend (nil selects it).
	Dir string
	// DirHugePages, with Dir, lets the kernel back the files' page cache
	// with large folios (up to 2 MiB, on file systems that have them:
	// ext4 and XFS on recent kernels) instead of the 4 KiB pages a
	// file-backed buffer asks for by default (MADV_RANDOM). Choose it for
	// a buffer that fits in memory: resident samples then cost what an
	// in-memory buffer's do, where 4 KiB pages leave a 4 GB buffer's
	// samples several times slower (address translation; docs/files.md),
	// and filling faults fewer pages. The price is I/O: Sync writes back
	// whole dirty folios (each row's dirty run rounds up to 2 MiB or so)
	// and a cold read reads a whole folio. It is a mapping hint, not
	// stored: Open maps with 4 KiB pages. Without Dir it is ErrConfig.
	DirHugePages bool

	// packedRecords lays the record arena out as buffers were before
	// line-aligned records (planLayout): Load and Open set it for a
	// checkpoint or directory whose header has no layout byte.
	packedRecords bool
}

// column is one field's ring storage: numEnvs*capacity steps, at offset
// off of every stride-byte step of arena ar (b.arenas; see planLayout).
type column struct {
	Field
	stepBytes int64
	tdt       tensor.Dtype // DType.Tensor(), for the checks of every add
	ar        int          // index of the column's arena in Buffer.arenas
	off       int64        // byte offset of the column in a step of its arena
	stride    int64        // bytes per step of the column's arena
	pad       []byte       // pad step pattern; nil = zeros
	builtin   bool
}

// Indices of the built-in columns, after the user fields.
const (
	colStepType = iota
	colNextStepType
	colReward
	colDiscount
	numBuiltin
)

// Bits of the host metadata mirror kept for every stored step.
const (
	metaStepMask  = 0x3 // step_type
	metaNextShift = 2   // next_step_type << 2
	metaNextMask  = 0x3 << metaNextShift
	metaDiscZero  = 1 << 4 // discount == 0
	// metaCut marks a step whose successor in the row does not continue it
	// (its next_step_type is not the next stored step's step_type): steps
	// between them were never written, as when an observer skips an
	// episode or a driver idles a row. No transition, n-step window or
	// episode runs across a cut.
	metaCut = 1 << 5
)

// Buffer is a ring buffer of trajectory steps, one time axis per env row,
// stored as ring arenas shaped [numEnvs, capacity, ...]: one record arena
// in which the small fields and the built-in columns of a step share one
// record (packed records, see planLayout), and one arena per large field.
//
// A Buffer is safe for concurrent use: writers that own disjoint rows may
// add at the same time as tables insert items and samplers read.
type Buffer struct {
	// mu guards the buffer's state. Lock order (a caller may skip levels,
	// never go back up): ckpt.saveMu, Hindsight.mu or BatchSource.mu (never
	// held together), then mu, then Table.mu, then the backend's own lock
	// inside each call. Functions named ...Locked expect the lock their
	// comment names to be held.
	mu       sync.RWMutex
	be       Backend
	numEnvs  int
	capacity int64
	cols     []column
	arenas   []ringArena // the ring arenas the columns live in (planLayout)
	// packedRecords: the record arena has the layout of buffers before
	// line-aligned records (Config.packedRecords).
	packedRecords bool
	ring          []Column  // the rings as Scatter columns; immutable after New
	hostRows      *hostRows // the rings as single-row adds write them, or nil (writer_host.go)
	byName        map[string]int
	nUser         int

	memBytes int64 // arenas plus host metadata, fixed at New
	// stepAll and stepObs are the bytes of one stored step over every
	// column and over the observation fields (stepBytes), fixed at New.
	stepAll, stepObs int64
	cursor           []int64 // steps ever written, per row
	meta             []uint8 // host mirror of step types and discount==0, per step
	owner            []*Writer
	stats            Stats // under mu

	tables    map[string]*Table
	tableList []*Table
	closed    bool
	// closedFlag mirrors closed for readers that must not take mu.
	closedFlag atomic.Bool

	// ckpt is the state of a copy-on-write Save (checkpoint_cow.go).
	ckpt ckptState

	// seed and calls key the direct samplers' draws (draws.go): each
	// call takes the next call number, without a lock.
	seed  uint64
	calls atomic.Uint64

	// cleanup frees the rings of a buffer dropped without Close.
	cleanup runtime.Cleanup

	// file is the state of a file-backed buffer (file.go), or nil.
	file *fileStore
}

// ringRef is what the cleanup of a dropped Buffer frees; it must not
// reference the Buffer.
type ringRef struct {
	be     Backend
	arenas []Arena
}

func freeRings(r ringRef) {
	for _, a := range r.arenas {
		_ = r.be.Free(a)
	}
}

// New allocates a buffer. It returns an error wrapping ErrConfig for an
// invalid configuration, or ErrBackend when the backend cannot allocate.
//
// Every size is checked before anything is allocated, with arithmetic that
// cannot overflow: a ring of more than 1 PiB is refused, and so is a
// buffer that does not fit in the memory available, whose error names the
// bytes asked and the bytes available. The figures compared are the
// arenas plus the host metadata (one byte per step and 16 bytes per row)
// against the host's available memory (MemAvailable of /proc/meminfo) for
// the cpu backend; for other backends that implement MemoryReporter (the
// gpu backend: the device's free memory), the arenas against the
// backend's figure and the host metadata against the host's. A figure
// that cannot be read (the host's, off Linux) is not checked.
func New(cfg Config) (*Buffer, error) {
	if cfg.Dir == "" && fileBackedForTests != nil {
		if _, ok := cfg.Backend.(*cpu.Backend); ok || cfg.Backend == nil {
			cfg.Dir = fileBackedForTests()
		}
	}
	if cfg.Dir != "" {
		return newFileBuffer(cfg, cpu.MemAvailable)
	}
	if cfg.DirHugePages {
		return nil, fmt.Errorf("%w: DirHugePages without Dir", ErrConfig)
	}
	return newBuffer(cfg, cpu.MemAvailable)
}

// newBuffer is New with the host's available memory read by hostMem.
func newBuffer(cfg Config, hostMem func() (int64, error)) (*Buffer, error) {
	return newBufferStore(cfg, hostMem, nil)
}

// newBufferStore is newBuffer with the rings and the metadata mirror from
// store when it is not nil (a file-backed buffer, file.go).
func newBufferStore(cfg Config, hostMem func() (int64, error), store ringStore) (*Buffer, error) {
	if cfg.NumEnvs <= 0 || cfg.Capacity <= 0 {
		return nil, fmt.Errorf("%w: NumEnvs %d and Capacity %d must be positive", ErrConfig, cfg.NumEnvs, cfg.Capacity)
	}
	b := &Buffer{
		numEnvs:  cfg.NumEnvs,
		capacity: int64(cfg.Capacity),
		byName:   make(map[string]int),
		nUser:    len(cfg.Fields),
	}
	for _, f := range cfg.Fields {
		if err := validField(f); err != nil {
			return nil, err
		}
		if _, dup := b.byName[f.Name]; dup || isBuiltin(f.Name) {
			return nil, fmt.Errorf("%w: duplicate field name %q", ErrConfig, f.Name)
		}
		b.byName[f.Name] = len(b.cols)
		f.Shape = slices.Clone(f.Shape)
		b.cols = append(b.cols, column{Field: f, stepBytes: int64(f.StepBytes()), tdt: f.DType.Tensor()})
	}
	last, first := int32(Last), int32(First)
	for _, c := range []column{
		{Field: Field{Name: StepTypeName, DType: Int32}, pad: (*[4]byte)(unsafe.Pointer(&last))[:]},
		{Field: Field{Name: NextStepTypeName, DType: Int32}, pad: (*[4]byte)(unsafe.Pointer(&first))[:]},
		{Field: Field{Name: RewardName, DType: Float32}},
		{Field: Field{Name: DiscountName, DType: Float32}},
	} {
		c.builtin = true
		c.stepBytes = int64(c.DType.Size())
		c.tdt = c.DType.Tensor()
		if c.pad != nil {
			c.pad = slices.Clone(c.pad)
		}
		b.byName[c.Name] = len(b.cols)
		b.cols = append(b.cols, c)
	}
	b.stepAll, b.stepObs = b.sumStepBytes()
	b.packedRecords = cfg.packedRecords
	strides := planLayout(b.cols, b.packedRecords)
	steps, ringBytes, hostBytes, err := b.sizes(strides)
	if err != nil {
		return nil, err
	}
	be := cfg.Backend
	if be == nil {
		if be, err = DefaultBackend(); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrBackend, err)
		}
	}
	if store != nil {
		// The rings and the metadata live in files: only the rows' host
		// state takes memory, and the disk must hold the files.
		ringBytes, hostBytes = 0, int64(cfg.NumEnvs)*rowMetaBytes
		if err := checkStoreDisk(store, steps, strides); err != nil {
			return nil, err
		}
	}
	if err := checkMemory(be, ringBytes, hostBytes, hostMem); err != nil {
		return nil, fmt.Errorf("%w: %d rows of %d steps of %d bytes: %w", ErrConfig, cfg.NumEnvs, cfg.Capacity, b.StepBytes(), err)
	}
	b.be = be
	b.cursor = make([]int64, cfg.NumEnvs)
	b.owner = make([]*Writer, cfg.NumEnvs)
	b.tables = make(map[string]*Table)
	b.seed = cfg.Seed
	for i, stride := range strides {
		var a Arena
		if store != nil {
			a, err = store.allocRing(be, i, steps*stride, stride)
		} else {
			a, err = be.Alloc(steps * stride)
		}
		if err != nil {
			b.freeArenas()
			return nil, fmt.Errorf("%w: allocating ring arena %d of %d (%d bytes): %w", ErrBackend, i, len(strides), steps*stride, err)
		}
		b.arenas = append(b.arenas, ringArena{arena: a, stride: stride})
		b.memBytes += a.Size()
	}
	for i := range b.cols {
		b.ring = append(b.ring, b.ringColumn(i))
	}
	b.planHostRows()
	if store != nil {
		if b.meta, err = store.metaBytes(be, steps); err != nil {
			b.freeArenas()
			return nil, err
		}
	} else {
		b.meta = make([]uint8, steps)
	}
	b.memBytes += steps
	// A buffer dropped without Close gives its rings back when the garbage
	// collector finds it (and its writers and tables) unreachable, as an
	// os.File closes its descriptor; Close remains the prompt path.
	rings := make([]Arena, len(b.arenas))
	for i := range b.arenas {
		rings[i] = b.arenas[i].arena
	}
	b.cleanup = runtime.AddCleanup(b, freeRings, ringRef{be: b.be, arenas: rings})
	return b, nil
}

// rowMetaBytes is the host memory a buffer keeps per row besides its
// steps: the cursor and the owning writer.
const rowMetaBytes = int64(unsafe.Sizeof(int64(0)) + unsafe.Sizeof((*Writer)(nil)))

// sizes returns the number of steps of the buffer's rings, the bytes of
// its arenas (of the given strides, from planLayout) and the bytes of its
// host metadata, or ErrConfig when they exceed maxArenaBytes. Nothing here
// can overflow: every product is checked with bits.Mul64.
func (b *Buffer) sizes(strides []int64) (steps, ringBytes, hostBytes int64, err error) {
	tooLarge := func() error {
		return fmt.Errorf("%w: %d rows of %d steps is too large (more than %d bytes)", ErrConfig, b.numEnvs, b.capacity, int64(maxArenaBytes))
	}
	var stepBytes uint64
	for _, s := range strides {
		// validField bounds every field's elements by maxArenaBytes, so a
		// step of one field is at most 8*maxArenaBytes, and a record of
		// fields of at most packMaxBytes is small: the sum is checked after
		// each addition, so it cannot overflow.
		stepBytes += uint64(s)
		if stepBytes > maxArenaBytes {
			return 0, 0, 0, tooLarge()
		}
	}
	hi, n := bits.Mul64(uint64(b.numEnvs), uint64(b.capacity))
	if hi != 0 || n > maxArenaBytes {
		return 0, 0, 0, tooLarge()
	}
	hi, ring := bits.Mul64(n, stepBytes)
	if hi != 0 || ring > maxArenaBytes {
		return 0, 0, 0, tooLarge()
	}
	// n <= 2^50 and numEnvs <= n: the host metadata is below 2^55.
	return int64(n), int64(ring), int64(n) + int64(b.numEnvs)*rowMetaBytes, nil
}

// checkMemory compares what a buffer asks with what is available (see New)
// and returns an error naming both, or nil.
func checkMemory(be Backend, ringBytes, hostBytes int64, hostMem func() (int64, error)) error {
	hostAvail, hostErr := hostMem()
	if h, ok := be.(HostMemory); ok && h.ArenasInHostMemory() {
		if hostErr == nil && ringBytes+hostBytes > hostAvail {
			return fmt.Errorf("the buffer needs %d bytes of host memory (%d of arenas, %d of metadata) but %d bytes are available",
				ringBytes+hostBytes, ringBytes, hostBytes, hostAvail)
		}
		return nil
	}
	if r, ok := be.(MemoryReporter); ok {
		if avail, err := r.MemAvailable(); err == nil && ringBytes > avail {
			return fmt.Errorf("the arenas need %d bytes of %s backend memory but %d bytes are available",
				ringBytes, be.Name(), avail)
		}
	}
	if hostErr == nil && hostBytes > hostAvail {
		return fmt.Errorf("the metadata needs %d bytes of host memory but %d bytes are available", hostBytes, hostAvail)
	}
	return nil
}

func isBuiltin(name string) bool {
	switch name {
	case StepTypeName, NextStepTypeName, RewardName, DiscountName, MaskName:
		return true
	}
	return false
}

// maxArenaBytes bounds a buffer's ring memory (1 PiB): larger sizes are
// configuration mistakes, refused before anything is allocated.
const maxArenaBytes = 1 << 50

func validField(f Field) error {
	if f.Name == "" {
		return fmt.Errorf("%w: field with no name", ErrConfig)
	}
	if !f.DType.valid() {
		return fmt.Errorf("%w: field %q: invalid dtype %v", ErrConfig, f.Name, f.DType)
	}
	if f.Role < Observation || f.Role > PolicyInfo {
		return fmt.Errorf("%w: field %q: invalid role %v", ErrConfig, f.Name, f.Role)
	}
	elems := uint64(1)
	for _, d := range f.Shape {
		if d <= 0 {
			return fmt.Errorf("%w: field %q: shape %v", ErrConfig, f.Name, f.Shape)
		}
		hi, lo := bits.Mul64(elems, uint64(d))
		if hi != 0 || lo > maxArenaBytes {
			return fmt.Errorf("%w: field %q: shape %v is too large", ErrConfig, f.Name, f.Shape)
		}
		elems = lo
	}
	return nil
}

func (b *Buffer) freeArenas() {
	for i := range b.arenas {
		if b.arenas[i].arena != nil {
			_ = b.be.Free(b.arenas[i].arena)
			b.arenas[i].arena = nil
		}
	}
}

// Close frees the buffer's memory. Every later call on the buffer and its
// writers, and every sample or insert of its tables, returns an error
// wrapping ErrClosed; blocked samplers and inserters are woken with it.
// Calls that only touch a table's metadata (Size, Delete, SetBeta,
// UpdatePriorities) keep working. Batches and transitions keep their own
// memory and stay valid until released. A buffer dropped without Close
// frees its memory once the garbage collector finds it unreachable. A
// file-backed buffer (Config.Dir) is synced first (see Sync): Close
// returns the sync's error, if any, after releasing everything (its
// files, mappings and directory lock); its directory then holds the last
// synced state.
func (b *Buffer) Close() error {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return fmt.Errorf("%w: buffer closed twice", ErrClosed)
	}
	var ferr error
	if b.file != nil {
		ferr = b.syncLocked()
	}
	b.closed = true
	b.closedFlag.Store(true)
	b.cleanup.Stop()
	b.freeArenas()
	if b.file != nil {
		b.file.close(b.be)
	}
	tables := b.tableList
	b.mu.Unlock()
	for _, t := range tables {
		t.mu.Lock()
		if t.dev != nil {
			t.dev.release()
		}
		t.notifyLocked()
		t.mu.Unlock()
	}
	return ferr
}

// Backend returns the buffer's backend.
func (b *Buffer) Backend() Backend { return b.be }

// NumEnvs returns the number of env rows.
func (b *Buffer) NumEnvs() int { return b.numEnvs }

// Capacity returns the number of steps each row keeps.
func (b *Buffer) Capacity() int { return int(b.capacity) }

// Fields returns the user fields (not the built-in columns), in order.
func (b *Buffer) Fields() []Field {
	out := make([]Field, b.nUser)
	for i := range out {
		out[i] = b.cols[i].Field
		out[i].Shape = slices.Clone(out[i].Shape)
	}
	return out
}

// StepBytes returns the bytes of one step's fields, over all columns
// (without the padding of packed records; MemoryBytes counts that).
func (b *Buffer) StepBytes() int64 {
	var s int64
	for i := range b.cols {
		s += b.cols[i].stepBytes
	}
	return s
}

// MemoryBytes returns the memory the buffer holds for its steps: the ring
// arenas (numEnvs*capacity*StepBytes, plus the padding of the record
// arena's records, at most 15% of a record or less than its largest
// element) plus the host mirror of step types (one byte per step).
func (b *Buffer) MemoryBytes() int64 { return b.memBytes }

// Cursor returns the number of steps ever written to a row; the newest
// stored step of the row is Cursor-1. It returns -1 for a row out of range.
func (b *Buffer) Cursor(row int) int64 {
	if row < 0 || row >= b.numEnvs {
		return -1
	}
	b.mu.RLock()
	defer b.mu.RUnlock()
	return b.cursor[row]
}

// Oldest returns the oldest step still stored in a row (-1 for a row out
// of range).
func (b *Buffer) Oldest(row int) int64 {
	if row < 0 || row >= b.numEnvs {
		return -1
	}
	b.mu.RLock()
	defer b.mu.RUnlock()
	return b.oldest(row)
}

func (b *Buffer) oldest(row int) int64 { return max(0, b.cursor[row]-b.capacity) }

// Size returns the number of steps stored over all rows.
func (b *Buffer) Size() int64 {
	b.mu.RLock()
	defer b.mu.RUnlock()
	var n int64
	for r := range b.cursor {
		n += b.cursor[r] - b.oldest(r)
	}
	return n
}

// StepTypeAt returns the step type and next step type stored at absolute
// step pos of a row, from the host mirror. ok is false when the step is
// not stored.
func (b *Buffer) StepTypeAt(row int, pos int64) (st, next StepType, ok bool) {
	if row < 0 || row >= b.numEnvs {
		return 0, 0, false
	}
	b.mu.RLock()
	defer b.mu.RUnlock()
	if pos < b.oldest(row) || pos >= b.cursor[row] {
		return 0, 0, false
	}
	m := b.metaAt(row, pos)
	return StepType(m & metaStepMask), StepType((m & metaNextMask) >> metaNextShift), true
}

func (b *Buffer) metaAt(row int, pos int64) uint8 {
	return b.meta[int64(row)*b.capacity+pos%b.capacity]
}

func (b *Buffer) slot(row int, pos int64) int64 { return int64(row)*b.capacity + pos%b.capacity }
