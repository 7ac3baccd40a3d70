package tensorbuf

import (
	"fmt"
	"sync"
)

// cowLimit bounds the host bytes a copy-on-write save keeps for steps
// that writers overwrote before the save streamed them; a writer that
// would exceed it waits until the save has streamed (and released) some.
var cowLimit int64 = 64 << 20 // a variable for tests

// cowTestHook, when set by a test, runs before each chunk's download of
// a copy-on-write save, with no lock held.
var cowTestHook func(c int, off int64)

// ckptState is a Buffer's state for copy-on-write saves
// (SnapshotCopyOnWrite).
type ckptState struct {
	// saveMu serialises copy-on-write saves; it is taken before Buffer.mu.
	saveMu sync.Mutex
	// cow is the running copy-on-write save, nil when none; under
	// Buffer.mu (written with it held for writing, or by the saver alone
	// with it held for reading, which excludes every writer).
	cow *cowState
	// cond, on Buffer.mu, wakes writers waiting for cow to release bytes.
	cond *sync.Cond
}

// cowState tracks a copy-on-write save: how far it has streamed the
// arenas, and the cut's bytes of the slots writers overwrote before it
// streamed them.
type cowState struct {
	capacity int64
	stored   []int64            // per row: the slots of the cut's stored steps, from the row's first (the only ones saved)
	col      int                // the ring arena (Buffer.arenas) being streamed; earlier ones are done
	off      int64              // arena col is streamed up to this byte (its stored spans, in order)
	pres     []map[int64][]byte // per arena: slot -> the cut's record of stride bytes
	bytes    int64              // bytes held in pres
	total    int64              // bytes ever preserved, for SaveReport
}

// savedLocked reports whether slot's bytes of ring arena c need no
// keeping: they have been streamed, or the slot held no step at the cut
// (the save does not stream it).
func (s *cowState) savedLocked(c int, slot, stepBytes int64) bool {
	return slot%s.capacity >= s.stored[slot/s.capacity] || c < s.col || (c == s.col && (slot+1)*stepBytes <= s.off)
}

// beforeRingWrite is called by every writer of the rings (Writer.Add,
// ExperienceWriter) with b.mu held for writing, just before it writes
// the given slots of every column. While a copy-on-write save runs, it
// keeps the current bytes of each slot and ring arena (a whole record of
// the record arena) that held a step at the cut and that the save has not
// streamed yet (once per slot: those are the cut's bytes), so that the
// save writes the cut and not what the writer puts there. When the kept
// bytes would exceed cowLimit it waits (releasing b.mu) for the save to
// stream some; a buffer closed meanwhile fails with ErrClosed, before
// anything is written. A file-backed buffer then journals the synced
// contents of the slots (fileStore.beforeWrite).
func (b *Buffer) beforeRingWrite(idx []int64) error {
	if err := b.cowBeforeWrite(idx); err != nil {
		return err
	}
	return b.file.beforeWrite(b, idx)
}

// cowBeforeWrite is beforeRingWrite's part for copy-on-write saves.
func (b *Buffer) cowBeforeWrite(idx []int64) error {
	for {
		s := b.ckpt.cow
		if s == nil {
			return nil
		}
		need := int64(0)
		for c := range b.arenas {
			sb := b.arenas[c].stride
			for _, slot := range idx {
				if _, kept := s.pres[c][slot]; !kept && !s.savedLocked(c, slot, sb) {
					need += sb
				}
			}
		}
		if need == 0 {
			return nil
		}
		if s.bytes == 0 || s.bytes+need <= cowLimit {
			return b.preserveLocked(s, idx)
		}
		b.ckpt.cond.Wait()
		if b.closed {
			return fmt.Errorf("%w: write during a checkpoint", ErrClosed)
		}
	}
}

// preserveLocked keeps the bytes of the unsaved slots (see
// beforeRingWrite).
func (b *Buffer) preserveLocked(s *cowState, idx []int64) error {
	for c := range b.arenas {
		sb := b.arenas[c].stride
		for _, slot := range idx {
			if _, kept := s.pres[c][slot]; kept || s.savedLocked(c, slot, sb) {
				continue
			}
			old := make([]byte, sb)
			if err := b.be.Download(old, b.arenas[c].arena, slot*sb); err != nil {
				return fmt.Errorf("%w: checkpoint copy-on-write: %w", ErrBackend, err)
			}
			s.pres[c][slot] = old
			s.bytes += sb
			s.total += sb
		}
	}
	return nil
}

// startCOWLocked installs a copy-on-write save of the cut whose rows'
// cursors are given; the caller holds b.ckpt.saveMu and b.mu for writing.
func (b *Buffer) startCOWLocked(cursors []int64) {
	if b.ckpt.cond == nil {
		b.ckpt.cond = sync.NewCond(&b.mu)
	}
	s := &cowState{capacity: b.capacity, stored: make([]int64, len(cursors)), pres: make([]map[int64][]byte, len(b.arenas))}
	for r, c := range cursors {
		s.stored[r] = min(c, b.capacity)
	}
	for i := range s.pres {
		s.pres[i] = map[int64][]byte{}
	}
	b.ckpt.cow = s
}

// endCOW removes the running copy-on-write save, wakes the writers
// waiting for it and returns the bytes it preserved.
func (b *Buffer) endCOW() int64 {
	b.mu.Lock()
	s := b.ckpt.cow
	b.ckpt.cow = nil
	b.mu.Unlock()
	b.ckpt.cond.Broadcast()
	if s == nil {
		return 0
	}
	return s.total
}

// cowDownload downloads bytes [off, off+len(dst)) of ring arena c for
// a copy-on-write save, with b.mu held for reading (no writer runs during
// one chunk's download), patches in the cut's bytes of the slots writers
// overwrote, and records the progress, releasing the kept bytes of every
// slot now fully streamed.
func (b *Buffer) cowDownload(dst []byte, c int, off int64) error {
	if cowTestHook != nil {
		cowTestHook(c, off)
	}
	b.mu.RLock()
	if b.closed {
		b.mu.RUnlock()
		return fmt.Errorf("%w: Save", ErrClosed)
	}
	if err := b.be.Download(dst, b.arenas[c].arena, off); err != nil {
		b.mu.RUnlock()
		return fmt.Errorf("%w: checkpoint download: %w", ErrBackend, err)
	}
	s, sb, end := b.ckpt.cow, b.arenas[c].stride, off+int64(len(dst))
	m := s.pres[c]
	freed := int64(0)
	patch := func(slot int64, old []byte) {
		lo, hi := slot*sb, (slot+1)*sb
		if a, z := max(lo, off), min(hi, end); a < z {
			copy(dst[a-off:z-off], old[a-lo:z-lo])
		}
		if hi <= end {
			delete(m, slot)
			freed += sb
		}
	}
	if sb > 0 && len(dst) > 0 {
		first, last := off/sb, (end-1)/sb
		if int64(len(m)) < last-first+1 {
			for slot, old := range m {
				if slot >= first && slot <= last {
					patch(slot, old)
				}
			}
		} else {
			for slot := first; slot <= last; slot++ {
				if old, ok := m[slot]; ok {
					patch(slot, old)
				}
			}
		}
	}
	s.col, s.off = c, end
	s.bytes -= freed
	b.mu.RUnlock()
	if freed > 0 {
		b.ckpt.cond.Broadcast()
	}
	return nil
}
