package tensorbuf

import (
	"fmt"

	"gorgonia.org/tensor"
)

// DefaultPriority, as an Item's Priority, asks the table for its default
// priority: the running maximum of the positive priorities it has been
// given (by Insert or UpdatePriorities), or 1 before it has been given
// any. So with TD errors around 0.01 new items get about 0.01, not 1. This
// is the prioritized experience replay paper's rule (new transitions get
// the maximum priority so that each is sampled at least once soon), as
// TorchRL's and Flashbax's prioritized buffers apply it. The maximum
// never decreases. Any other negative priority is invalid; a priority of
// 0 is an explicit 0. The observers insert their items with
// DefaultPriority unless given a priority. (The value follows the
// precedent of compress/flate's DefaultCompression.)
const DefaultPriority = -1.0

// defaultPriorityLocked is the running maximum (see DefaultPriority).
// The caller holds t.mu.
func (t *Table) defaultPriorityLocked() float64 {
	if !t.hasMaxPriority {
		return 1
	}
	return t.maxPriority
}

// notePriorityLocked raises the running maximum to p; a priority of 0
// leaves it (a default of 0 would keep new items from ever being drawn).
func (t *Table) notePriorityLocked(p float64) {
	if p > 0 && (!t.hasMaxPriority || p > t.maxPriority) {
		t.maxPriority, t.hasMaxPriority = p, true
	}
}

// MaxPriority returns the priority that an item inserted with
// DefaultPriority gets now. It is safe for concurrent use.
func (t *Table) MaxPriority() float64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.defaultPriorityLocked()
}

// UpdatePriorities32 is UpdatePriorities for float32 priorities (a
// learner's absolute TD errors, say); it converts them exactly and
// allocates nothing. It is safe for concurrent use.
func (t *Table) UpdatePriorities32(keys []uint64, priorities []float32) error {
	return updatePriorities(t, keys, priorities)
}

// updatePriorities checks every key and priority, then sets them all (or
// nothing: see UpdatePriorities), and raises the running maximum priority.
func updatePriorities[F float32 | float64](t *Table, keys []uint64, priorities []F) error {
	if len(keys) != len(priorities) {
		return fmt.Errorf("%w: %d keys, %d priorities", ErrInvalidArg, len(keys), len(priorities))
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	// The slots and weights found while checking are kept for setting,
	// so each key is looked up and each weight computed once.
	slots, ws := grow(&t.slots, len(keys)), grow(&t.ws, len(keys))
	for i, k := range keys {
		s, ok := t.lookup(k)
		if !ok {
			return fmt.Errorf("%w: %d", ErrUnknownKey, k)
		}
		p := float64(priorities[i])
		if !finiteNonNeg(p) {
			return fmt.Errorf("%w: priority %v", ErrInvalidArg, p)
		}
		w, err := t.weight(p)
		if err != nil {
			return err
		}
		slots[i], ws[i] = s, w
	}
	if t.cfg.Selector == Prioritized {
		// Set every leaf, then undo them all (in reverse, so that a key
		// given twice gets its first value back) if the total no longer
		// fits: the tree's sums are recomputed from the leaves, so the
		// undo restores it bit for bit.
		old := grow(&t.us, len(keys))
		for i, s := range slots {
			old[i] = t.tree.get(int(s))
			t.setWeight(s, ws[i])
		}
		if !t.fits(0) {
			for i := len(keys) - 1; i >= 0; i-- {
				t.setWeight(slots[i], old[i])
			}
			return fmt.Errorf("%w: %d priorities: the sum of priority^%v over the table would exceed %v",
				ErrInvalidArg, len(keys), t.a, maxTreeTotal)
		}
	}
	for i, s := range slots {
		p := float64(priorities[i])
		t.notePriorityLocked(p)
		t.setPriorityLocked(s, p)
		if t.dev != nil {
			t.dev.noteItem(s)
		}
	}
	t.orderUpdateLocked(slots)
	return nil
}

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
// once they are learned).
//
// Ordering: the backend reads the tensors when its stream reaches the
// update, after the work queued there before the call. Tensors written by
// that work (a batch's KeyTensor, an Upload) need nothing more; tensors a
// learner writes on its own stream need UpdatePrioritiesDeviceAfter (or,
// equivalently, Streamer.WaitHandle on the learner's event before this
// call and Streamer.Record of an event after it), and the learner must not
// write them again before that event has completed. It is safe for
// concurrent use.
func (t *Table) UpdatePrioritiesDevice(keys, priorities *tensor.Dense) error {
	return t.updatePrioritiesDevice(keys, priorities, 0, nil)
}

// UpdatePrioritiesDeviceAfter is UpdatePrioritiesDevice for keys and
// priorities a learner writes on its own device stream, ordered on the
// device with no host wait: the update's kernels wait for the CUevent
// written, which the learner records on its stream after its last write
// of the tensors (0: no wait), and done, an event of the table's backend
// (Streamer.NewEvent; nil: none), is recorded after them, so that the
// learner's stream waits on done.Handle() (cuStreamWaitEvent) before it
// writes the tensors again. The backend's stream would otherwise read
// the tensors whenever it gets to them, before the learner's writes have
// landed or after its next ones. The wait holds all later work on the
// backend's stream too (see Streamer.WaitHandle). It fails with
// ErrInvalidArg, changing nothing, when an event is given to a backend
// without a stream (host backends, whose work is done when the call
// returns) or done is not an event of the table's backend. It is safe for
// concurrent use.
func (t *Table) UpdatePrioritiesDeviceAfter(keys, priorities *tensor.Dense, written uintptr, done Event) error {
	return t.updatePrioritiesDevice(keys, priorities, written, done)
}

// eventChecker is implemented by Streamer backends that tell their own
// live events from others (the gpu backend), so that a call given a
// foreign event fails before it queues anything.
type eventChecker interface {
	CheckEvent(e Event) error
}

func (t *Table) updatePrioritiesDevice(keys, priorities *tensor.Dense, written uintptr, done Event) error {
	if t.dev == nil || t.dev.prio == nil {
		return fmt.Errorf("%w: table %q: UpdatePrioritiesDevice needs a Prioritized table with DeviceSelection", ErrInvalidArg, t.cfg.Name)
	}
	if keys == nil || priorities == nil || keys.Dtype() != tensor.Uint64 || priorities.Dtype() != tensor.Float32 ||
		keys.DataSize() != priorities.DataSize() {
		return fmt.Errorf("%w: UpdatePrioritiesDevice needs uint64 keys and float32 priorities of one length", ErrInvalidArg)
	}
	b := t.b
	var st Streamer
	if written != 0 || done != nil {
		var ok bool
		if st, ok = b.be.(Streamer); !ok {
			return fmt.Errorf("%w: UpdatePrioritiesDeviceAfter: the %s backend has no stream to order events on", ErrInvalidArg, b.be.Name())
		}
		if c, ok := st.(eventChecker); ok && done != nil {
			if err := c.CheckEvent(done); err != nil {
				return fmt.Errorf("%w: UpdatePrioritiesDeviceAfter: done: %w", ErrInvalidArg, err)
			}
		}
	}
	b.mu.RLock()
	defer b.mu.RUnlock()
	if b.closed {
		return fmt.Errorf("%w: UpdatePrioritiesDevice", ErrClosed)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.dev.rec != nil {
		if written != 0 || done != nil {
			return fmt.Errorf("%w: table %q: UpdatePrioritiesDeviceAfter's events in a recorded round (a graph would not record them again)", ErrInvalidArg, t.cfg.Name)
		}
		if err := t.roundChangedLocked(); err != nil {
			return err
		}
	}
	if err := t.flushMirrorLocked(); err != nil {
		return err
	}
	m := t.dev
	if m.epoch+1 >= 1<<32 {
		return fmt.Errorf("%w: table %q: 2^32 UpdatePrioritiesDevice calls", ErrInvalidArg, t.cfg.Name)
	}
	if keys.DataSize() > 0 {
		if written != 0 {
			if err := st.WaitHandle(written); err != nil {
				return fmt.Errorf("%w: waiting for the learner's event: %w", ErrBackend, err)
			}
		}
		m.epoch++
		mir, _, epoch := t.roundMirror()
		if m.rec != nil {
			m.rec.r.updates++
		}
		m.devSet = true
		if err := m.prio.UpdatePriorities(mir, keys, priorities, epoch, t.a); err != nil {
			m.dirty = true // what reached the tree is unknown: repair it whole next time
			return fmt.Errorf("%w: device priority update: %w", ErrBackend, err)
		}
	}
	if done != nil {
		if err := st.Record(done); err != nil {
			return fmt.Errorf("%w: recording the update's event: %w", ErrBackend, err)
		}
	}
	return nil
}
