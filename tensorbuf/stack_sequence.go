package tensorbuf

import (
	"context"
	"fmt"
	"slices"

	"github.com/trajring/trajring/kernels"
)

// Frame stacking in sequence samples: SequenceOptions.Stack for the
// direct sampler (Buffer.SampleSequencesInto) and Table.SampleStackedInto
// for tables of sequence items (the items of the sequence observers).
// Step j of a window of row r starting at step s holds, for a stacked
// field, the K frames that end at step s+j, exactly as the observation of
// the transition at s+j (see FrameStack): recurrent agents (R2D2-style
// sequences of Atari frames) see at every step what a DQN sees at that
// step. The frames before a window's first step come from the ring (they
// are the history of its first observation, not part of the window); a
// pad step's frames are all zeros, as every pad step is.

// SampleStackedInto is SampleInto with the observation fields of stack
// stacked over their last K frames at every step of every item: each
// such field comes back shaped [n, L, K, ...shape] (the others as
// SampleInto shapes them), step j of item i holding the K frames that end
// at step Items[i].Start+j, oldest first, with the edges of FrameStack:
// zeros before the step's episode (a later one of the K steps is First),
// before a cut and before the row's first step; a pad step's frames are
// all zeros. Nothing extra is stored: the ring keeps one frame a step.
//
// A table keeps an item while its first step is stored, so an item drawn
// whose first step's stack reaches a step the ring has overwritten (one
// of the K-1 frames before its first step, near its row's oldest step)
// comes with Valid[i] false and those frames zeros; a learner masks it
// out (as TableTransitions.Valid). Later steps' stacks reach less far
// back, so only the first step's stack can be lost. Valid has n entries.
//
// The selection, waiting and rate limiting are SampleInto's (the same
// draws for the same seed). A DeviceSelection table serves a stacked
// sample by selecting on the host (the same items: the draws are shared
// bit for bit), so Items, Keys, Probabilities and Weights are filled and
// KeyTensor & co. are nil, and L is the longest item drawn (or FixedLen);
// the frames are still gathered into backend memory (device memory in
// cuda builds) by the window gather, from windows computed on the host.
// A Prioritized one first learns the priorities UpdatePrioritiesDevice
// set (waiting for the backend once after such an update), so that the
// host draws with the priorities the backend would have drawn with.
//
// A bad stack (see FrameStack: an unknown field, a field that is not an
// observation, a field named twice, K below 1 or above the row capacity)
// fails with ErrConfig before anything is drawn, consuming nothing and
// leaving bt as it was; otherwise it fails as SampleInto does. It is safe
// for concurrent use, on distinct batches.
//
// For example, a table of 8-step sequences of 84x84 frames sampled with
// the last 4 frames at every step:
//
//	err := table.SampleStackedInto(ctx, bt, 32, []tensorbuf.FrameStack{{Field: "pixels", K: 4}})
//	// bt.Fields["pixels"] is [32, 8, 4, 84, 84]; mask out !bt.Valid[i].
func (t *Table) SampleStackedInto(ctx context.Context, bt *Batch, n int, stack []FrameStack) error {
	return t.sampleInto(ctx, bt, n, stack)
}

// seqStackPlan is stackPlan for a direct sample of windows of l steps,
// which also refuses a stack past the window: l+K-1 above the row
// capacity, a window whose frames and the K-1 before its first step
// could never be stored at once (every window of a full row would then
// lose frames, unless an episode starts inside its stack).
func (b *Buffer) seqStackPlan(st []FrameStack, l int, dst *[]int) ([]int, error) {
	plan, err := b.stackPlan(st, dst)
	if err != nil || plan == nil {
		return plan, err
	}
	for i, k := range plan {
		if k > 0 && int64(l)+int64(k)-1 > b.capacity {
			return nil, fmt.Errorf("%w: frame stack of %q past the window: %d steps and the %d frames before the first need %d stored steps, capacity %d",
				ErrConfig, b.cols[i].Name, l, k-1, l+k-1, b.capacity)
		}
	}
	return plan, nil
}

// seqStepBytes returns the bytes of one step of a batch stacked by plan
// (nil: none): every column, the mask, and the K-1 extra frames of each
// stacked field; 2^62 when it overflows (checkSampleSize refuses it).
func (b *Buffer) seqStepBytes(plan []int) int64 {
	all, _ := b.stepBytes()
	per := all + 1 // +1: the mask
	for i, k := range plan {
		if k > 1 {
			extra, ok := kernels.Mul(int64(k-1), b.cols[i].stepBytes)
			if !ok || per > 1<<62-extra {
				return 1 << 62
			}
			per += extra
		}
	}
	return per
}

// stackPart names stacked frames in size messages.
func (b *Buffer) stackPart(plan []int) string {
	if plan == nil {
		return ""
	}
	return " with stacked frames"
}

// gatherSeqStacks writes the stacked frames of every stacked field of bt
// (n items of l steps, bt.Items) with one window gather of n*l*K one-step
// windows each (a frame before the episode, or of a pad step, is a window
// of no real step: zeros), the same gather as gatherStacks', and sets
// bt.Valid (false where the first step's stack reaches an overwritten
// step). Without stacking it does nothing. The caller holds b.mu.
func (b *Buffer) gatherSeqStacks(bt *Batch, n, l int) error {
	if bt.stack == nil {
		return nil
	}
	valid := grow(&bt.Valid, n)
	for i := range valid {
		valid[i] = true
	}
	l64 := int64(l)
	for i, k := range bt.stack {
		if k == 0 {
			continue
		}
		k64 := int64(k)
		wins := grow(&bt.swins, n*l*k)
		for j, it := range bt.Items[:n] {
			row := int64(it.Row)
			for s := range l64 {
				w := wins[(int64(j)*l64+s)*k64:][:k64]
				if s >= int64(it.Len) {
					for f := range w {
						w[f] = Window{Row: row, Start: it.Start}
					}
					continue
				}
				t := it.Start + s
				real, lost := b.stackReal(it.Row, t, k64)
				if lost {
					valid[j] = false
				}
				for f := range k64 {
					w[f] = Window{Row: row, Start: t}
					if f >= k64-real {
						w[f].Start, w[f].Len = t-(k64-1-f), 1
					}
				}
			}
		}
		cols := grow(&bt.scols, 1)
		cols[0] = b.ring[i]
		cols[0].Out, cols[0].OutOff, cols[0].Pad = bt.out.arena, bt.out.offs[i], nil
		if err := b.be.GatherWindows(cols, wins, 1, b.capacity, nil, 0); err != nil {
			return fmt.Errorf("%w: frame-stack gather: %w", ErrBackend, err)
		}
	}
	return nil
}

// keptStarts enumerates the windows of l steps that ok keeps: the
// fallback of a stacked direct sample whose draws keep being refused.
// The caller holds b.mu.
func (b *Buffer) keptStarts(l int64, ok func(Window) bool) []Window {
	var out []Window
	for r := range b.numEnvs {
		for s := b.oldest(r); s+l <= b.cursor[r]; s++ {
			if w := (Window{Row: int64(r), Start: s}); ok(w) {
				out = append(out, w)
			}
		}
	}
	return out
}

// sameStack reports whether two stack plans (nil: none) ask for the same
// layout.
func sameStack(a, b []int) bool {
	return (a == nil) == (b == nil) && slices.Equal(a, b)
}
