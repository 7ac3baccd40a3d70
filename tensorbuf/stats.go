package tensorbuf

// Stats counts what the buffer's writers have written since New. It is a
// plain value.
type Stats struct {
	// Steps is the number of steps written, summed over rows.
	Steps int64
	// Cuts is the number of steps written whose StepType contradicted the
	// NextStepType of the previous step of their row (see
	// WriterOptions.Strict). Each makes that previous step a cut: no
	// transition, n-step window or episode runs across it.
	Cuts int64
	// DroppedTransitions is the number of transitions the cuts removed:
	// one per cut whose previous step is not a boundary step (step type
	// Last, which starts no transition anyway), counted when the cut is
	// written. Transitions later overwritten by the ring stay counted.
	DroppedTransitions int64
}

// Stats returns the buffer's counts. It is safe for concurrent use, also
// after Close.
func (b *Buffer) Stats() Stats {
	b.mu.RLock()
	defer b.mu.RUnlock()
	return b.stats
}
