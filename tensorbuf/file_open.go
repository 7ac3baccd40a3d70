package tensorbuf

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"slices"

	"github.com/trajring/trajring/cpu"
	"github.com/trajring/trajring/tensorbuf/internal/ckptio"
)

// readStateFile reads the state file's trailer and returns a reader of its
// checkpoint stream, with the buffer's id and generation.
func readStateFile(dir string) (f *os.File, r io.Reader, id [16]byte, gen uint64, err error) {
	path := filepath.Join(dir, fileStateName)
	f, err = os.Open(path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, nil, id, 0, fmt.Errorf("%w: %s holds no file-backed buffer (no state file): %w", ErrCorrupt, dir, err)
		}
		return nil, nil, id, 0, fmt.Errorf("%w: opening %s: %w", ErrStorage, path, err)
	}
	st, err := f.Stat()
	if err != nil {
		_ = f.Close()
		return nil, nil, id, 0, fmt.Errorf("%w: %s: %w", ErrStorage, path, err)
	}
	t := make([]byte, stateTrailerLen)
	if st.Size() < stateTrailerLen {
		_ = f.Close()
		return nil, nil, id, 0, fmt.Errorf("%w: %s is truncated", ErrCorrupt, path)
	}
	if _, err := f.ReadAt(t, st.Size()-stateTrailerLen); err != nil {
		_ = f.Close()
		return nil, nil, id, 0, fmt.Errorf("%w: %s: %w", ErrStorage, path, err)
	}
	n := int64(binary.LittleEndian.Uint64(t[32:]))
	if string(t[:8]) != stateMagic || binary.LittleEndian.Uint32(t[40:]) != crc32.Checksum(t[:40], crcTable) || n != st.Size()-stateTrailerLen {
		_ = f.Close()
		return nil, nil, id, 0, fmt.Errorf("%w: %s is not the state of a file-backed buffer, or is truncated", ErrCorrupt, path)
	}
	copy(id[:], t[8:24])
	gen = binary.LittleEndian.Uint64(t[24:])
	return f, bufio.NewReaderSize(io.NewSectionReader(f, 0, n), 1<<16), id, gen, nil
}

// Open reopens the file-backed buffer in dir (created by New with
// Config.Dir) as of its last Sync or Close: rows, cursors, step metadata,
// statistics, the direct samplers' random state and every table, so that
// it samples what the synced buffer would have sampled next. Steps added
// and table changes made after the last sync are lost; synced steps
// overwritten since are put back from the undo journal, so a process
// killed at any point (even inside Sync) reopens at a synced state, never
// a torn one. Writers are not kept: open new ones. A Hindsight relabeler
// is not kept either. Open ends with a Sync.
//
// It fails with ErrLocked when another Buffer has dir open, ErrCorrupt
// when dir holds no buffer or a file is truncated, missing, or not this
// buffer's (a header or length that differs from the state), ErrStorage
// for an I/O error. The buffer uses the cpu backend. Safe for concurrent
// use.
func Open(dir string) (_ *Buffer, err error) {
	lock, err := lockDir(dir)
	if err != nil {
		return nil, err
	}
	be := cpu.New()
	fs := &fileStore{dir: dir, lock: lock}
	var b *Buffer
	defer func() {
		if err != nil {
			if b != nil {
				b.file = nil
				_ = b.Close()
			}
			fs.close(be)
		}
	}()
	sf, sr, id, gen, err := readStateFile(dir)
	if err != nil {
		return nil, err
	}
	defer sf.Close()
	fs.id, fs.gen = id, gen
	cr, err := ckptio.NewReader(sr)
	if err != nil {
		return nil, err
	}
	defer cr.Close()
	h, err := readHeader(cr)
	if err != nil {
		return nil, err
	}
	if b, err = newBufferStore(Config{NumEnvs: h.numEnvs, Capacity: int(h.capacity), Fields: h.fields, Backend: be,
		packedRecords: h.packedRecords}, cpu.MemAvailable, fs); err != nil {
		return nil, err
	}
	if err := fs.applyJournal(b); err != nil {
		return nil, err
	}
	if err := b.restoreState(cr, h); err != nil {
		return nil, err
	}
	fs.synced = slices.Clone(b.cursor)
	fs.fresh = make([]int64, b.numEnvs)
	if err := fs.openJournal(); err != nil {
		return nil, err
	}
	b.file = fs
	b.mu.Lock()
	err = b.syncLocked()
	b.mu.Unlock()
	if err != nil {
		return nil, err
	}
	return b, nil
}

// restoreState is restore for a state file: the same sections, with an
// empty metadata section (the mirror is the directory's file, checked
// here) and no arenas.
func (b *Buffer) restoreState(cr *ckptio.Reader, h *ckptHeader) error {
	if err := b.restoreRowsAndTables(cr, h); err != nil {
		return err
	}
	if err := b.readMeta(cr, nil); err != nil {
		return err
	}
	return cr.End()
}

// ReadFileBufferInfo reads the summary of the file-backed buffer in dir
// from its state file (as ReadCheckpointInfo reads a checkpoint's), as of
// its last sync, without opening or locking it. Errors are as Open's.
// Safe for concurrent use.
func ReadFileBufferInfo(dir string) (CheckpointInfo, uint64, error) {
	f, r, _, gen, err := readStateFile(dir)
	if err != nil {
		return CheckpointInfo{}, 0, err
	}
	defer f.Close()
	info, err := ReadCheckpointInfo(r)
	return info, gen, err
}
