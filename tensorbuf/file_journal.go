package tensorbuf

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"

	"github.com/trajring/trajring/cpu"
)

// resetJournal empties the journal under the current generation.
func (fs *fileStore) resetJournal() error {
	h := make([]byte, journalHeaderLen)
	copy(h, journalMagic)
	copy(h[8:24], fs.id[:])
	binary.LittleEndian.PutUint64(h[24:], fs.gen)
	binary.LittleEndian.PutUint32(h[32:], crc32.Checksum(h[:32], crcTable))
	if err := fs.journal.Truncate(journalHeaderLen); err != nil {
		return err
	}
	if _, err := fs.journal.WriteAt(h, 0); err != nil {
		return err
	}
	fs.jlen = journalHeaderLen
	return nil
}

// Journal records: the slot (u64), a kind byte, the slot's metadata byte
// and, for a whole record, the slot's bytes of every ring arena. Records
// come in frames (u32 length, u32 CRC-32C, records) appended before the
// writes they undo; a torn last frame is one whose writes never ran.
const (
	recWhole      = 1 // the slot's synced bytes and metadata
	recFreshRange = 2 // slots never written before (a u64 count follows): Open zeroes their metadata
	// freshChunk is the slots one recFreshRange record covers: a row
	// filling for the first time journals 18 bytes per freshChunk steps.
	freshChunk = 4096
)

// beforeWrite is called with b.mu held for writing before the given slots
// are written (data or metadata): it appends to the journal the synced
// contents of every slot that still holds them, once per slot between two
// syncs, so that Open can put back the last synced state. The metadata of
// a row's newest synced step, which the first write after a sync may
// change (a cut), is kept too.
func (fs *fileStore) beforeWrite(b *Buffer, idx []int64) error {
	if fs == nil {
		return nil
	}
	if fs.jerr != nil {
		return fmt.Errorf("%w: the journal could not be reset after a sync (%w): Sync again", ErrStorage, fs.jerr)
	}
	capa := b.capacity
	rec := append(fs.rec[:0], make([]byte, 8)...)
	for _, s := range idx {
		r := s / capa
		c, sy := b.cursor[r], fs.synced[r]
		if c == sy && c > 0 {
			rec = fs.appendRecord(b, rec, recWhole, b.slot(int(r), c-1))
		}
		q := int64(-1) // the step slot s holds now, if any
		if c > 0 {
			last := c - 1
			q = last - ((last%capa-s%capa)+capa)%capa
		}
		switch {
		case q < 0:
			// Never written: slots [s%capa, capa) of the row are all fresh.
			if i := s % capa; i >= fs.fresh[r] {
				n := min(freshChunk, capa-i)
				rec = binary.LittleEndian.AppendUint64(rec, uint64(s))
				rec = append(rec, recFreshRange, 0)
				rec = binary.LittleEndian.AppendUint64(rec, uint64(n))
				fs.fresh[r] = i + n
			}
		case q < sy:
			rec = fs.appendRecord(b, rec, recWhole, s)
		}
	}
	fs.rec = rec
	if len(rec) == 8 {
		return nil
	}
	binary.LittleEndian.PutUint32(rec[0:], uint32(len(rec)-8))
	binary.LittleEndian.PutUint32(rec[4:], crc32.Checksum(rec[8:], crcTable))
	if _, err := fs.journal.WriteAt(rec, fs.jlen); err != nil {
		_ = fs.journal.Truncate(fs.jlen)
		return fmt.Errorf("%w: journal of %s: %w", ErrStorage, fs.dir, err)
	}
	fs.jlen += int64(len(rec))
	return nil
}

func (fs *fileStore) appendRecord(b *Buffer, rec []byte, kind uint8, slot int64) []byte {
	rec = binary.LittleEndian.AppendUint64(rec, uint64(slot))
	rec = append(rec, kind, b.meta[slot])
	if kind == recWhole {
		for i := range b.arenas {
			st := b.arenas[i].stride
			rec = append(rec, b.arenas[i].arena.(*cpu.Arena).Bytes()[slot*st:(slot+1)*st]...)
		}
	}
	return rec
}

// applyJournal puts back the synced contents the journal kept, newest
// record first so that a slot ends with the oldest (the synced) bytes,
// when the journal belongs to the state's generation.
func (fs *fileStore) applyJournal(b *Buffer) error {
	path := filepath.Join(fs.dir, fileJournalName)
	data, err := os.ReadFile(path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil
		}
		return fmt.Errorf("%w: reading %s: %w", ErrStorage, path, err)
	}
	if len(data) < journalHeaderLen {
		return nil // created but never reset: no write ran under it
	}
	h := data[:journalHeaderLen]
	if string(h[:8]) != journalMagic || binary.LittleEndian.Uint32(h[32:]) != crc32.Checksum(h[:32], crcTable) {
		return fmt.Errorf("%w: %s is not a trajring journal", ErrCorrupt, path)
	}
	if !bytes.Equal(h[8:24], fs.id[:]) {
		return fmt.Errorf("%w: %s belongs to another buffer", ErrCorrupt, path)
	}
	gen := binary.LittleEndian.Uint64(h[24:])
	if gen > fs.gen {
		return fmt.Errorf("%w: %s is of generation %d, the state of %d", ErrCorrupt, path, gen, fs.gen)
	}
	if gen < fs.gen {
		return nil // the sync that wrote the state ended before any write
	}
	steps := int64(len(b.meta))
	whole := int64(10)
	for i := range b.arenas {
		whole += b.arenas[i].stride
	}
	var recs []int64
	p := data[journalHeaderLen:]
	base := int64(journalHeaderLen)
	for len(p) >= 8 {
		n := int64(binary.LittleEndian.Uint32(p))
		if n > int64(len(p))-8 || crc32.Checksum(p[8:8+n], crcTable) != binary.LittleEndian.Uint32(p[4:]) {
			break // a torn last frame: its writes never ran
		}
		for o := int64(8); o < 8+n; {
			if 8+n-o < 10 {
				return fmt.Errorf("%w: %s: a frame ends inside a record", ErrCorrupt, path)
			}
			slot, kind := int64(binary.LittleEndian.Uint64(p[o:])), p[o+8]
			size := whole
			if kind == recFreshRange {
				size = 18
			}
			if slot < 0 || slot >= steps || (kind != recWhole && kind != recFreshRange) || 8+n-o < size {
				return fmt.Errorf("%w: %s: record of slot %d", ErrCorrupt, path, slot)
			}
			if kind == recFreshRange {
				if c := int64(binary.LittleEndian.Uint64(p[o+10:])); c < 1 || c > b.capacity-slot%b.capacity {
					return fmt.Errorf("%w: %s: %d fresh slots from slot %d", ErrCorrupt, path, c, slot)
				}
			}
			recs = append(recs, base+o)
			o += size
		}
		p = p[8+n:]
		base += 8 + n
	}
	for i := len(recs) - 1; i >= 0; i-- {
		r := data[recs[i]:]
		slot, kind := int64(binary.LittleEndian.Uint64(r)), r[8]
		if kind == recFreshRange {
			clear(b.meta[slot : slot+int64(binary.LittleEndian.Uint64(r[10:]))])
			continue
		}
		b.meta[slot] = r[9]
		if kind == recWhole {
			o := int64(10)
			for c := range b.arenas {
				st := b.arenas[c].stride
				copy(b.arenas[c].arena.(*cpu.Arena).Bytes()[slot*st:(slot+1)*st], r[o:o+st])
				o += st
			}
		}
	}
	return nil
}
