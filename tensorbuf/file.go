package tensorbuf

import (
	"bytes"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sync/atomic"
	"syscall"

	"github.com/trajring/trajring/cpu"
	"github.com/trajring/trajring/internal/atomicfile"
	"github.com/trajring/trajring/tensorbuf/internal/ckptio"
)

// ErrLocked reports a directory whose file-backed buffer another Buffer
// (of this process or another) holds open: a directory is opened by one
// Buffer at a time (flock on DIR/LOCK).
var ErrLocked = errors.New("tensorbuf: buffer directory in use")

// ErrStorage reports an I/O failure of a file-backed buffer's files (a
// full disk: errors.Is(err, syscall.ENOSPC)); the call that fails changes
// nothing, and the buffer stays usable.
var ErrStorage = errors.New("tensorbuf: buffer file storage failure")

// The files of a buffer directory (docs/files.md).
const (
	fileLockName    = "LOCK"
	fileStateName   = "state"
	fileJournalName = "journal"
	fileMetaName    = "meta"
	// dataHeaderLen is the header page of every data file; the payload
	// (a ring arena, or the metadata mirror) is mapped from this offset.
	dataHeaderLen = 4096
	fileMagic     = "TRJRDAT1"
	journalMagic  = "TRJRJNL1"
	stateMagic    = "TRJRSTA1"
	// journalHeaderLen: magic, id, generation, CRC-32C.
	journalHeaderLen = 8 + 16 + 8 + 4
	// stateTrailerLen: magic, id, generation, checkpoint length, CRC-32C.
	stateTrailerLen = 8 + 16 + 8 + 8 + 4
	fileKindRing    = 0
	fileKindMeta    = 1
)

func fileRingName(i int) string { return fmt.Sprintf("ring-%d", i) }

var crcTable = crc32.MakeTable(crc32.Castagnoli)

// fileStore is the state of a file-backed buffer (Config.Dir, Open): its
// directory lock, data files, journal and the cursors of its last sync.
// Every field is guarded by Buffer.mu (written with it held for writing).
type fileStore struct {
	dir     string
	id      [16]byte
	gen     uint64 // generation of the last sync
	lock    *os.File
	rings   []*os.File
	metaF   *os.File
	metaA   *cpu.Arena // the mapping of the metadata mirror
	journal *os.File
	jlen    int64
	// jerr, when set, refuses every write until a sync succeeds: the
	// journal could not be reset after a sync, so writes would not be
	// undoable.
	jerr   error
	synced []int64 // per row: the cursor of the last sync
	// fresh is, per row, the end of the row's slots already journaled as
	// fresh (recFreshRange) since the last sync.
	fresh []int64
	rec   []byte // scratch for journal frames
	// prefetch: samples ask for their windows' pages first
	// (file_prefetch.go); atomic, as samplers hold b.mu for reading.
	prefetch atomic.Bool
	create   bool // creating: the arenas' files are new
	// hugePages maps the files for large folios (Config.DirHugePages).
	hugePages bool
}

// pages is the page advice of the store's mappings: 4 KiB pages unless
// Config.DirHugePages asked for large folios.
func (fs *fileStore) pages() cpu.PageAdvice {
	if fs.hugePages {
		return cpu.HugePages
	}
	return cpu.SmallPages
}

// FileInfo describes a file-backed buffer's directory (Buffer.FileInfo).
// A plain value.
type FileInfo struct {
	// Dir is the buffer's directory.
	Dir string
	// Generation counts the buffer's syncs since it was created.
	Generation uint64
	// FileBytes is the bytes of its data files (the rings and the metadata
	// mirror, allocated on disk when it was created).
	FileBytes int64
	// JournalBytes is the size of the undo journal: the synced steps
	// overwritten since the last sync (Sync empties it).
	JournalBytes int64
}

// FileInfo returns the buffer's file figures and true, or false when it
// is not file-backed. Safe for concurrent use.
func (b *Buffer) FileInfo() (FileInfo, bool) {
	b.mu.RLock()
	defer b.mu.RUnlock()
	fs := b.file
	if fs == nil {
		return FileInfo{}, false
	}
	fi := FileInfo{Dir: fs.dir, Generation: fs.gen, JournalBytes: fs.jlen, FileBytes: dataHeaderLen + int64(len(b.meta))}
	for i := range b.arenas {
		fi.FileBytes += dataHeaderLen + int64(len(b.meta))*b.arenas[i].stride
	}
	return fi, true
}

// lockDir takes the directory's lock, failing with ErrLocked when another
// Buffer holds it.
func lockDir(dir string) (*os.File, error) {
	f, err := os.OpenFile(filepath.Join(dir, fileLockName), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("%w: buffer directory %s: %w", ErrConfig, dir, err)
	}
	if err := flockFile(f); err != nil {
		_ = f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("%w: %s is open in another buffer (of this process or another): %w", ErrLocked, dir, err)
		}
		return nil, fmt.Errorf("%w: locking %s: %w", ErrStorage, dir, err)
	}
	return f, nil
}

// close releases the store's files, mappings and lock; be frees the
// metadata mapping.
func (fs *fileStore) close(be Backend) {
	if fs.metaA != nil {
		// Calls that read the metadata without checking Close (StepTypeAt)
		// then see zeros instead of faulting.
		if fs.metaA.Retire() != nil {
			_ = be.Free(fs.metaA)
		}
		fs.metaA = nil
	}
	for _, f := range append(slices.Clone(fs.rings), fs.metaF, fs.journal) {
		if f != nil {
			_ = f.Close()
		}
	}
	fs.rings, fs.metaF, fs.journal = nil, nil, nil
	if fs.lock != nil {
		_ = fs.lock.Close() // releases the flock
		fs.lock = nil
	}
}

// dataHeader is the header page of a data file.
func (fs *fileStore) dataHeader(kind, index uint32, payload, stride int64) []byte {
	h := make([]byte, dataHeaderLen)
	copy(h, fileMagic)
	binary.LittleEndian.PutUint32(h[8:], kind)
	binary.LittleEndian.PutUint32(h[12:], index)
	copy(h[16:32], fs.id[:])
	binary.LittleEndian.PutUint64(h[32:], uint64(payload))
	binary.LittleEndian.PutUint64(h[40:], uint64(stride))
	binary.LittleEndian.PutUint32(h[48:], crc32.Checksum(h[:48], crcTable))
	return h
}

// createData creates a data file with its header and its payload's blocks
// allocated, so that writes through the mapping never meet a full disk.
func (fs *fileStore) createData(name string, kind, index uint32, payload, stride int64) (*os.File, error) {
	path := filepath.Join(fs.dir, name)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, fmt.Errorf("%w: creating %s: %w", ErrStorage, path, err)
	}
	fail := func(err error) (*os.File, error) {
		_ = f.Close()
		_ = os.Remove(path)
		return nil, fmt.Errorf("%w: creating %s (%d bytes): %w", ErrStorage, path, dataHeaderLen+payload, err)
	}
	if _, err := f.WriteAt(fs.dataHeader(kind, index, payload, stride), 0); err != nil {
		return fail(err)
	}
	if err := fallocate(f, dataHeaderLen+payload); err != nil {
		return fail(err)
	}
	return f, nil
}

// openData opens a data file and checks its header and length against
// what the state declares: ErrCorrupt for a truncated or foreign file.
func (fs *fileStore) openData(name string, kind, index uint32, payload, stride int64) (*os.File, error) {
	path := filepath.Join(fs.dir, name)
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("%w: %s is missing: %w", ErrCorrupt, path, err)
		}
		return nil, fmt.Errorf("%w: opening %s: %w", ErrStorage, path, err)
	}
	h := make([]byte, dataHeaderLen)
	st, err := f.Stat()
	if err == nil {
		_, err = f.ReadAt(h, 0)
	}
	want := fs.dataHeader(kind, index, payload, stride)
	switch {
	case err != nil && !errors.Is(err, io.EOF):
		err = fmt.Errorf("%w: reading %s: %w", ErrStorage, path, err)
	case err != nil || st.Size() < dataHeaderLen || string(h[:8]) != fileMagic:
		err = fmt.Errorf("%w: %s is not a trajring data file", ErrCorrupt, path)
	case !bytes.Equal(h[16:32], fs.id[:]):
		err = fmt.Errorf("%w: %s belongs to another buffer", ErrCorrupt, path)
	case !bytes.Equal(h, want):
		err = fmt.Errorf("%w: %s: header does not match the buffer's state", ErrCorrupt, path)
	case st.Size() != dataHeaderLen+payload:
		err = fmt.Errorf("%w: %s holds %d bytes, the buffer's state says %d (truncated or changed)", ErrCorrupt, path, st.Size(), dataHeaderLen+payload)
	default:
		return f, nil
	}
	_ = f.Close()
	return nil, err
}

// ringStore gives newBuffer the memory of a file-backed buffer: ring
// arenas and the metadata mirror mapped from the directory's files.
type ringStore interface {
	allocRing(be Backend, i int, n, stride int64) (Arena, error)
	metaBytes(be Backend, n int64) ([]uint8, error)
}

func (fs *fileStore) allocRing(_ Backend, i int, n, stride int64) (Arena, error) {
	var f *os.File
	var err error
	if fs.create {
		f, err = fs.createData(fileRingName(i), fileKindRing, uint32(i), n, stride)
	} else {
		f, err = fs.openData(fileRingName(i), fileKindRing, uint32(i), n, stride)
	}
	if err != nil {
		return nil, err
	}
	a, err := cpu.MapFile(f, dataHeaderLen, n, fs.pages())
	if err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("%w: %w", ErrStorage, err)
	}
	fs.rings = append(fs.rings, f)
	return a, nil
}

func (fs *fileStore) metaBytes(_ Backend, n int64) ([]uint8, error) {
	var f *os.File
	var err error
	if fs.create {
		f, err = fs.createData(fileMetaName, fileKindMeta, 0, n, 1)
	} else {
		f, err = fs.openData(fileMetaName, fileKindMeta, 0, n, 1)
	}
	if err != nil {
		return nil, err
	}
	a, err := cpu.MapFile(f, dataHeaderLen, n, fs.pages())
	if err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("%w: %w", ErrStorage, err)
	}
	fs.metaF, fs.metaA = f, a
	return a.Bytes(), nil
}

// fileBackend returns the backend of a file-backed buffer: the cpu
// backend (nil selects it), whose arenas are host memory that can map a
// file; any other is refused.
func fileBackend(be Backend) (Backend, error) {
	if be == nil {
		return cpu.New(), nil
	}
	if _, ok := be.(*cpu.Backend); !ok {
		return nil, fmt.Errorf("%w: Config.Dir needs the cpu backend, whose rings are host memory mapped from files; backend %q keeps its rings in its own memory (device rings cannot be file-backed)", ErrConfig, be.Name())
	}
	return be, nil
}

// newFileBuffer creates a file-backed buffer in cfg.Dir (see Config.Dir).
func newFileBuffer(cfg Config, hostMem func() (int64, error)) (_ *Buffer, err error) {
	be, err := fileBackend(cfg.Backend)
	if err != nil {
		return nil, err
	}
	cfg.Backend = be
	dir := cfg.Dir
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("%w: buffer directory: %w", ErrConfig, err)
	}
	lock, err := lockDir(dir)
	if err != nil {
		return nil, err
	}
	fs := &fileStore{dir: dir, lock: lock, create: true, hugePages: cfg.DirHugePages}
	defer func() {
		if err != nil {
			fs.close(be)
		}
	}()
	if _, err := os.Stat(filepath.Join(dir, fileStateName)); err == nil {
		return nil, fmt.Errorf("%w: %s holds a buffer already: open it with Open, or remove the directory", ErrConfig, dir)
	}
	if _, err := rand.Read(fs.id[:]); err != nil {
		return nil, fmt.Errorf("%w: buffer id: %w", ErrStorage, err)
	}
	b, err := newBufferStore(cfg, hostMem, fs)
	if err != nil {
		return nil, err
	}
	fs.create = false
	fs.synced = make([]int64, b.numEnvs)
	fs.fresh = make([]int64, b.numEnvs)
	b.file = fs
	if err := fs.openJournal(); err != nil {
		b.file = nil
		_ = b.Close()
		return nil, err
	}
	b.mu.Lock()
	err = b.syncLocked()
	b.mu.Unlock()
	if err != nil {
		b.file = nil
		_ = b.Close()
		return nil, err
	}
	return b, nil
}

// openJournal opens (creating) the journal file.
func (fs *fileStore) openJournal() error {
	path := filepath.Join(fs.dir, fileJournalName)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return fmt.Errorf("%w: opening %s: %w", ErrStorage, path, err)
	}
	fs.journal = f
	return nil
}

// checkDisk fails with ErrConfig, ErrStorage and syscall.ENOSPC when the
// directory's file system has less free space than need bytes.
func checkDisk(dir string, need int64) error {
	free, ok := diskFree(dir)
	if !ok {
		return nil // nothing to compare with: fallocate decides
	}
	if need > free {
		return fmt.Errorf("%w (%w): the buffer needs %d bytes on disk in %s but %d are free: %w", ErrConfig, ErrStorage, need, dir, free, syscall.ENOSPC)
	}
	return nil
}

// Sync makes the buffer's current state the one Open returns after a
// crash: it writes the pages of the rings and of the metadata mirror
// dirtied since the last sync to disk (msync), then the rows' cursors,
// the statistics, the samplers' random state and every table to the
// directory's state file (atomically: a temporary file renamed over it),
// and empties the undo journal. Its cost is the dirty pages plus the
// tables' metadata, not the size of the rings.
//
// Writers, inserters and samplers wait while it runs (it holds the
// buffer's lock, so that the state written is a cut). It fails with
// ErrConfig on a buffer that is not file-backed, ErrClosed after Close,
// and ErrStorage for an I/O error (a full disk: errors.Is(err,
// syscall.ENOSPC)); a failed Sync leaves the last synced state on disk
// and the buffer usable, so a later Sync can succeed once space returns.
// It is safe for concurrent use.
func (b *Buffer) Sync() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.file == nil {
		return fmt.Errorf("%w: Sync of a buffer that is not file-backed (Config.Dir)", ErrConfig)
	}
	if b.closed {
		return fmt.Errorf("%w: Sync", ErrClosed)
	}
	return b.syncLocked()
}

// fileSnapLocked is snapshotLocked without the metadata mirror, which a
// file-backed buffer keeps in its file. The caller holds b.mu.
func (b *Buffer) fileSnapLocked() (*bufSnap, error) {
	s := &bufSnap{
		numEnvs: b.numEnvs, capacity: b.capacity, fields: b.Fields(),
		cursor: slices.Clone(b.cursor), stats: b.stats, layout: b.layoutByte(),
	}
	if err := b.snapDrawsAndTables(s); err != nil {
		return nil, err
	}
	return s, nil
}

// fileBackedForTests, when set by a test binary (TRAJRING_TEST_FILE_BACKED,
// file_suite_test.go), makes New file-backed for every cpu buffer that
// names no directory, in the directory it returns: the suite's tests then
// run on file-backed buffers.
var fileBackedForTests func() string

// syncTestHook, when set by a test, runs at each stage of a sync.
var syncTestHook func(stage string)

// syncLocked is Sync; the caller holds b.mu for writing.
func (b *Buffer) syncLocked() error {
	fs := b.file
	hook := func(stage string) {
		if syncTestHook != nil {
			syncTestHook(stage)
		}
	}
	snap, err := b.fileSnapLocked()
	if err != nil {
		return err
	}
	defer snap.release()
	hook("flush")
	for i := range b.arenas {
		if err := b.arenas[i].arena.(*cpu.Arena).Flush(); err != nil {
			return fmt.Errorf("%w: sync of %s: %w", ErrStorage, fs.dir, err)
		}
	}
	if err := fs.metaA.Flush(); err != nil {
		return fmt.Errorf("%w: sync of %s: %w", ErrStorage, fs.dir, err)
	}
	hook("state")
	gen := fs.gen + 1
	if err := atomicfile.Write(filepath.Join(fs.dir, fileStateName), func(w io.Writer) error {
		return writeState(w, snap, fs.id, gen)
	}); err != nil {
		return fmt.Errorf("%w: sync of %s: %w", ErrStorage, fs.dir, err)
	}
	hook("journal")
	fs.gen = gen
	fs.synced = snap.cursor
	fs.fresh = make([]int64, b.numEnvs)
	if err := fs.resetJournal(); err != nil {
		fs.jerr = err
		return fmt.Errorf("%w: sync of %s: resetting the journal: %w", ErrStorage, fs.dir, err)
	}
	fs.jerr = nil
	hook("done")
	return nil
}

// writeState writes the state file: a checkpoint stream (header, rows,
// tables, an empty metadata section, the end; trajring inspect reads it)
// followed by the trailer naming the buffer and the generation.
func writeState(w io.Writer, snap *bufSnap, id [16]byte, gen uint64) error {
	cnt := &countWriter{w: w}
	cw, err := ckptio.NewWriter(cnt, false)
	if err != nil {
		return err
	}
	defer cw.Close()
	if err := writeSnap(cw, snap); err != nil {
		return err
	}
	if err := cw.End(); err != nil {
		return err
	}
	t := make([]byte, stateTrailerLen)
	copy(t, stateMagic)
	copy(t[8:24], id[:])
	binary.LittleEndian.PutUint64(t[24:], gen)
	binary.LittleEndian.PutUint64(t[32:], uint64(cnt.n))
	binary.LittleEndian.PutUint32(t[40:], crc32.Checksum(t[:40], crcTable))
	_, err = w.Write(t)
	return err
}

type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// checkStoreDisk checks, for a buffer being created, that its files fit
// on the directory's disk (see checkDisk).
func checkStoreDisk(store ringStore, steps int64, strides []int64) error {
	fs, ok := store.(*fileStore)
	if !ok || !fs.create {
		return nil
	}
	need := int64(len(strides)+1)*dataHeaderLen + steps
	for _, s := range strides {
		need += steps * s
	}
	return checkDisk(fs.dir, need)
}

// Residency returns the bytes of a file-backed buffer's rings and metadata
// mirror that are in memory (mincore), and their total size: the fraction
// of the buffer that samples without reading the disk. A buffer that is
// not file-backed is all resident. Safe for concurrent use; it costs one
// byte per 4 KiB page, checked 1 GiB at a time.
func (b *Buffer) Residency() (resident, total int64, err error) {
	b.mu.RLock()
	defer b.mu.RUnlock()
	if b.closed {
		return 0, 0, fmt.Errorf("%w: Residency", ErrClosed)
	}
	for i := range b.arenas {
		total += b.arenas[i].arena.Size()
	}
	total += int64(len(b.meta))
	if b.file == nil {
		return total, total, nil
	}
	arenas := []*cpu.Arena{b.file.metaA}
	for i := range b.arenas {
		arenas = append(arenas, b.arenas[i].arena.(*cpu.Arena))
	}
	for _, a := range arenas {
		n, err := a.Resident()
		if err != nil {
			return 0, 0, fmt.Errorf("%w: %w", ErrStorage, err)
		}
		resident += n
	}
	return resident, total, nil
}

// Evict gives back the memory of a file-backed buffer's rings: their
// pages leave the process's mappings and, where clean (written by a Sync),
// the page cache, so that later samples read them from disk. It is for
// measuring the cold path and for handing memory to other work; the data
// and the synced state are unchanged. It fails with ErrConfig on a buffer
// that is not file-backed. Safe for concurrent use; samplers running
// meanwhile fault their pages back in.
func (b *Buffer) Evict() error {
	b.mu.RLock()
	defer b.mu.RUnlock()
	if b.file == nil {
		return fmt.Errorf("%w: Evict of a buffer that is not file-backed", ErrConfig)
	}
	if b.closed {
		return fmt.Errorf("%w: Evict", ErrClosed)
	}
	for i := range b.arenas {
		if err := b.arenas[i].arena.(*cpu.Arena).Evict(b.file.rings[i], dataHeaderLen); err != nil {
			return fmt.Errorf("%w: %w", ErrStorage, err)
		}
	}
	if err := b.file.metaA.Evict(b.file.metaF, dataHeaderLen); err != nil {
		return fmt.Errorf("%w: %w", ErrStorage, err)
	}
	return nil
}
