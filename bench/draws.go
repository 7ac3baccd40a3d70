package bench

import (
	"github.com/trajring/trajring/tensorbuf"
)

// Draws are the random rows the engine sampled, kept so that the gather
// ceiling moves exactly the same rows. Each element is one operation.
type Draws struct {
	Windows [][]tensorbuf.Window
	Idx     [][]int64
	Next    [][]int64
}

// windowsOf converts a batch's items into windows.
func windowsOf(items []tensorbuf.Item) []tensorbuf.Window {
	w := make([]tensorbuf.Window, len(items))
	for i, it := range items {
		w[i] = tensorbuf.Window{Row: int64(it.Row), Start: it.Start, Len: int64(it.Len)}
	}
	return w
}

// transitionIdx converts sampled transitions' rows and steps into ring
// step indices of the steps and of their successors.
func transitionIdx(rows []int, steps []int64, capacity int64) (idx, next []int64) {
	idx, next = make([]int64, len(rows)), make([]int64, len(rows))
	for i, r := range rows {
		idx[i] = int64(r)*capacity + steps[i]%capacity
		next[i] = int64(r)*capacity + (steps[i]+1)%capacity
	}
	return idx, next
}

// drawRows is how many random rows the gather ceiling cycles through (or
// the whole ring when smaller): far more than any last-level cache holds
// even for 108-byte steps, so the ceiling reads memory as the engine does
// with its fresh draws, and is not flattered by re-reading cached rows.
const drawRows = 1 << 20

// drawCount is how many operations' draws a scenario keeps for its
// ceiling: enough to cover min(ringSteps, drawRows) rows, at most 4096.
func drawCount(perOp int, ringSteps int64) int {
	rows := min(ringSteps, drawRows)
	return int(max(1, min(4096, (rows+int64(perOp)-1)/int64(max(perOp, 1)))))
}

// SequenceDraws samples k batches of n sequences of l steps from b and
// returns their windows.
func SequenceDraws(b *tensorbuf.Buffer, k, n, l int, opt tensorbuf.SequenceOptions) (Draws, error) {
	var d Draws
	var bt tensorbuf.Batch
	defer bt.Release()
	for range k {
		if err := b.SampleSequencesInto(&bt, n, l, opt); err != nil {
			return d, err
		}
		d.Windows = append(d.Windows, windowsOf(bt.Items))
	}
	return d, nil
}

// TransitionDraws samples k batches of n transitions from b and returns
// their ring indices.
func TransitionDraws(b *tensorbuf.Buffer, k, n int) (Draws, error) {
	var d Draws
	var tr tensorbuf.Transitions
	defer tr.Release()
	for range k {
		if err := b.SampleTransitionsInto(&tr, n); err != nil {
			return d, err
		}
		idx, next := transitionIdx(tr.Rows, tr.Steps, int64(b.Capacity()))
		d.Idx, d.Next = append(d.Idx, idx), append(d.Next, next)
	}
	return d, nil
}
