package tensorbuf

import (
	"fmt"

	"gorgonia.org/tensor"
)

// UpdatePrioritiesDevice sets the priorities of items by key from tensors
// in the backend's memory, without copying them to the host: keys
// (uint64, as the table makes them, such as Batch.KeyTensor) and
// priorities (float32, such as a learner's TD errors on the device), of
// one length. It needs a Prioritized table with DeviceSelection
// (ErrInvalidArg otherwise, or for tensors of other dtypes or lengths)
// and queues its work without waiting for it: on the gpu backend three
// launches (claim the slots, set the winners' leaves and mark the groups
// above them, repair the marked groups as one block, level by level;
// with more than 4096 keys the repair takes one launch per tree level
// instead), after which the device tree equals, bit for bit, the tree the
// host would build from the same weights.
//
// Like UpdatePriorities, a key given twice takes its last priority. Unlike
// it (the host cannot see the tensors without waiting), a key that names
// no item of the table is skipped rather than failing the call, and so is
// an update whose priority is negative, NaN or infinite; the caller
// vouches that the sum of priority^PriorityExponent stays finite. The
// weight priority^PriorityExponent is computed on the backend: with
// PriorityExponent 1 it is the priority itself, exactly as on the host;
// otherwise the device's pow may differ from Go's math.Pow in the last
// bits.
//
// The host learns these priorities lazily, waiting for the backend once:
// before a checkpoint (Buffer.Save, so that a checkpoint holds the
// priorities the device samples with) and when the mirror moves to a
// larger arena; then Items' priorities become the float32 values given
// and the host tree the device's weights. Until then Items' priorities
// and the host tree (host-selected samples such as SampleTransitionsInto,
// the priority checks of inserts) keep the last priorities the host set,
// and DefaultPriority's running maximum does not include them (it does
// once they are learned). It is safe for concurrent use.
func (t *Table) UpdatePrioritiesDevice(keys, priorities *tensor.Dense) error {
	if t.dev == nil || t.dev.prio == nil {
		return fmt.Errorf("%w: table %q: UpdatePrioritiesDevice needs a Prioritized table with DeviceSelection", ErrInvalidArg, t.cfg.Name)
	}
	if keys == nil || priorities == nil || keys.Dtype() != tensor.Uint64 || priorities.Dtype() != tensor.Float32 ||
		keys.DataSize() != priorities.DataSize() {
		return fmt.Errorf("%w: UpdatePrioritiesDevice needs uint64 keys and float32 priorities of one length", ErrInvalidArg)
	}
	b := t.b
	b.mu.RLock()
	defer b.mu.RUnlock()
	if b.closed {
		return fmt.Errorf("%w: UpdatePrioritiesDevice", ErrClosed)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if err := t.flushMirrorLocked(); err != nil {
		return err
	}
	m := t.dev
	if m.epoch+1 >= 1<<32 {
		return fmt.Errorf("%w: table %q: 2^32 UpdatePrioritiesDevice calls", ErrInvalidArg, t.cfg.Name)
	}
	if keys.DataSize() == 0 {
		return nil
	}
	m.epoch++
	mir := m.mirror()
	m.devSet = true
	if err := m.prio.UpdatePriorities(mir, keys, priorities, m.epoch, t.a); err != nil {
		m.dirty = true // what reached the tree is unknown: repair it whole next time
		return fmt.Errorf("%w: device priority update: %w", ErrBackend, err)
	}
	return nil
}
