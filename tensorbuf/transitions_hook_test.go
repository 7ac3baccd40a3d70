package tensorbuf

import (
	"fmt"
	"unsafe"

	"github.com/trajring/trajring/internal/rawbytes"
)

// DeviceSelectionHost returns the masked weights and validity bytes of a
// device-selected sample, read back from its device tensors (tests only).
func DeviceSelectionHost(tr *TableTransitions) ([]float32, []byte, error) {
	if tr.KeyTensor == nil {
		return nil, nil, fmt.Errorf("not a device-selected sample")
	}
	o := &tr.sel
	if err := o.be.Sync(); err != nil {
		return nil, nil, err
	}
	m, v := make([]float32, tr.selN), make([]byte, tr.selN)
	if err := o.be.Download(unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(m))), 4*len(m)), o.arena, o.offs[selMasked]); err != nil {
		return nil, nil, err
	}
	if err := o.be.Download(v, o.arena, o.offs[selValid]); err != nil {
		return nil, nil, err
	}
	return m, v, nil
}

// CheckMetaMirror compares a DeviceSelection table's metadata mirror
// (as of its last sample) with the buffer's metadata and cursors (tests
// only; no writer may run meanwhile).
func CheckMetaMirror(t *Table) error {
	b := t.b
	b.mu.RLock()
	defer b.mu.RUnlock()
	t.mu.Lock()
	defer t.mu.Unlock()
	mm := &t.dev.meta
	if mm.arena.arena == nil {
		return fmt.Errorf("no metadata mirror")
	}
	if err := b.be.Sync(); err != nil {
		return err
	}
	meta := make([]byte, len(b.meta))
	cursors := make([]int64, len(b.cursor))
	if err := b.be.Download(meta, mm.arena.arena, mm.arena.offs[0]); err != nil {
		return err
	}
	if err := b.be.Download(rawbytes.Of(cursors), mm.arena.arena, mm.arena.offs[1]); err != nil {
		return err
	}
	for i := range meta {
		if meta[i] != b.meta[i] {
			return fmt.Errorf("metadata byte %d (row %d, slot %d): mirror %#x, buffer %#x", i, int64(i)/b.capacity, int64(i)%b.capacity, meta[i], b.meta[i])
		}
	}
	for r := range cursors {
		if cursors[r] != b.cursor[r] {
			return fmt.Errorf("row %d: cursor mirror %d, buffer %d", r, cursors[r], b.cursor[r])
		}
	}
	return nil
}

// TableCounters returns a table's sample calls, samples and size (tests
// only).
func TableCounters(t *Table) string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return fmt.Sprintf("calls %d samples %d size %d", t.calls, t.samples, len(t.live))
}

// TableEpoch returns a DeviceSelection table's device priority update
// epoch (tests only).
func TableEpoch(t *Table) uint64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.dev.epoch
}
