package tensorbuf

import (
	"fmt"

	"sort"

	"gorgonia.org/tensor"
)

// CanSample reports whether a sample of n items would be served now
// without waiting: the table holds enough items (and, with
// MaxTimesSampled, enough samples left) and its rate limiter lets n
// samples through. It waits for nothing and changes nothing; another
// goroutine may change the answer before the caller acts on it. It is
// false for n < 1, for a sample the table could never serve (see
// SampleInto) and after the buffer is closed. Safe for concurrent use.
func (t *Table) CanSample(n int) bool {
	if n < 1 || t.checkBatch(n) != nil || t.b.closedFlag.Load() {
		return false
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.canSampleLocked(n)
}

// CanInsert reports whether an insert would pass the rate limiter now
// without waiting (always true without a samples-per-insert limiter; a
// full table makes room by removing its oldest item). It does not check
// an item's steps, waits for nothing and changes nothing. It is false
// after the buffer is closed. Safe for concurrent use.
func (t *Table) CanInsert() bool {
	if t.b.closedFlag.Load() {
		return false
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.canInsertLocked(0)
}

// Field returns the batch tensor of a user field or built-in column by
// name (step_type, next_step_type, reward, discount, mask). An unknown
// name fails with ErrUnknownField, listing the names the batch has, and a
// released or never-filled batch with ErrInvalidArg. Not safe for
// concurrent use with calls that change the batch.
func (bt *Batch) Field(name string) (*tensor.Dense, error) {
	if bt == nil || bt.Mask == nil {
		return nil, fmt.Errorf("%w: field %q of an empty batch", ErrInvalidArg, name)
	}
	var d *tensor.Dense
	switch name {
	case StepTypeName:
		d = bt.StepType
	case NextStepTypeName:
		d = bt.NextStepType
	case RewardName:
		d = bt.Reward
	case DiscountName:
		d = bt.Discount
	case MaskName:
		d = bt.Mask
	default:
		d = bt.Fields[name]
	}
	if d == nil {
		names := append(sortedKeys(bt.Fields), StepTypeName, NextStepTypeName, RewardName, DiscountName, MaskName)
		return nil, fmt.Errorf("%w: %q (the batch has %v)", ErrUnknownField, name, names)
	}
	return d, nil
}

// IsDoneName names the IsDone tensor of transitions.
const IsDoneName = "is_done"

// Field returns the tensor of a user field at t (observation, action or
// policy info) or of reward, discount or is_done by name; NextObservation
// holds the observations at t+1. An unknown name fails with
// ErrUnknownField, listing the names the transitions have, and released or
// empty transitions with ErrInvalidArg. Not safe for concurrent use with
// calls that change the transitions.
func (tr *Transitions) Field(name string) (*tensor.Dense, error) {
	if tr == nil || tr.shape == nil {
		return nil, fmt.Errorf("%w: field %q of empty transitions", ErrInvalidArg, name)
	}
	var d *tensor.Dense
	switch name {
	case RewardName:
		d = tr.Reward
	case DiscountName:
		d = tr.Discount
	case IsDoneName:
		d = tr.IsDone
	default:
		for _, m := range []map[string]*tensor.Dense{tr.Observation, tr.Action, tr.PolicyInfo} {
			if v, ok := m[name]; ok {
				d = v
			}
		}
	}
	if d == nil {
		return nil, fmt.Errorf("%w: %q (the transitions have %v)", ErrUnknownField, name, tr.names())
	}
	return d, nil
}

// Next returns the observation field of the same name at t+1
// (NextObservation), or ErrUnknownField for a name that is not an
// observation field (ErrInvalidArg for released or empty transitions).
func (tr *Transitions) Next(name string) (*tensor.Dense, error) {
	if tr == nil || tr.shape == nil {
		return nil, fmt.Errorf("%w: next observation %q of empty transitions", ErrInvalidArg, name)
	}
	d, ok := tr.NextObservation[name]
	if !ok || d == nil {
		return nil, fmt.Errorf("%w: %q is not an observation field (next observations: %v)",
			ErrUnknownField, name, sortedKeys(tr.NextObservation))
	}
	return d, nil
}

func (tr *Transitions) names() []string {
	var names []string
	for _, m := range []map[string]*tensor.Dense{tr.Observation, tr.Action, tr.PolicyInfo} {
		names = append(names, sortedKeys(m)...)
	}
	return append(names, RewardName, DiscountName, IsDoneName)
}

func sortedKeys(m map[string]*tensor.Dense) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// ItemMask tells an item's own pad steps from the padding a batch adds
// to reach its longest item. A batch of items of different lengths (the
// episodes of an AddEpisode observer, Table.All, Sample) is shaped
// [n, L] with L the longest Len+Pad; Mask is false on every step that is
// not a real step, whichever padding it is. ItemMask returns a host bool
// tensor shaped [n, L] that is true on the item's Len+Pad steps and false
// on the steps after them, so that per step:
//
//	Mask            real step of the item
//	!Mask && ItemMask  pad step of the item (Item.Pad: padded windows of
//	                   the sequence observers)
//	!ItemMask       batch padding (a shorter item than the longest)
//
// Both kinds of padding hold the same values (zeros, step type Last, next
// step type First, reward and discount 0). The information comes from
// Items, which ItemMask reads; it allocates a new tensor on each call.
// An empty or released batch fails with ErrInvalidArg. Not safe for
// concurrent use with calls that change the batch.
func (bt *Batch) ItemMask() (*tensor.Dense, error) {
	if bt == nil || bt.Mask == nil || len(bt.Items) != bt.n {
		return nil, fmt.Errorf("%w: item mask of an empty batch", ErrInvalidArg)
	}
	m := make([]bool, bt.n*bt.l)
	for i, it := range bt.Items {
		k := min(it.Len+it.Pad, bt.l)
		row := m[i*bt.l : (i+1)*bt.l]
		for j := range k {
			row[j] = true
		}
	}
	return tensor.New(tensor.WithShape(bt.n, bt.l), tensor.WithBacking(m)), nil
}
