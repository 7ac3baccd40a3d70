package tensorbuf

import "fmt"

// MarkCut makes the newest stored step of each given row a cut, as if the
// next step written to the row did not continue it (see
// WriterOptions.Strict): no transition, n-step window or episode runs from
// that step into the next one. It is for writers that know steps are
// missing even though the next step's StepType would continue the row,
// such as the ingester of remote actors after a lost frame. A row with no
// step, or whose newest step is already a cut, is left as it is. Each new
// cut is counted in Stats like the cuts Add makes (so a caller should not
// mark a row whose next step will contradict it anyway: Add counts that
// cut itself).
//
// It fails with ErrRows for a row that is not the writer's (nothing is
// marked), or ErrClosed.
func (w *Writer) MarkCut(rows ...int) error {
	if len(rows) == 0 {
		return nil
	}
	rows, err := w.checkRows(rows, "MarkCut")
	if err != nil {
		return err
	}
	b := w.b
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed || w.closed {
		return fmt.Errorf("%w: MarkCut", ErrClosed)
	}
	for _, r := range rows {
		pos := b.cursor[r]
		if pos == 0 {
			continue
		}
		m := &b.meta[b.slot(r, pos-1)]
		if *m&metaCut != 0 {
			continue
		}
		if err := b.file.beforeWrite(b, []int64{b.slot(r, pos-1)}); err != nil {
			return err
		}
		*m |= metaCut
		b.stats.Cuts++
		if StepType(*m&metaStepMask) != Last && b.capacity > 1 {
			b.stats.DroppedTransitions++
		}
	}
	return nil
}
