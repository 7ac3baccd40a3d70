package tensorbuf

import (
	"fmt"

	"github.com/trajring/trajring/internal/philox"
)

// SequenceOptions configure the buffer's direct sequence sampler. It is a
// plain value (its Stack slice is only read), safe to share between
// goroutines.
type SequenceOptions struct {
	// EpisodeAware cuts each window after its episode's boundary step (the
	// step whose step_type is Last) and pads the rest, as an episode-end
	// padded item is; windows then never start at a boundary step.
	EpisodeAware bool
	// Stack, when set, stacks the observation fields it names over their
	// last K frames at every step of the window: such a field comes back
	// shaped [n, L, K, ...shape], step j of a window holding the frames
	// that end at that step, with the edges of FrameStack (zeros before
	// the step's episode, a cut or the row's first step; a pad step's
	// frames are all zeros). A window whose first step's stack reaches a
	// step the ring has overwritten is never drawn (later steps' stacks
	// reach less far back). A bad request fails with ErrConfig, consuming
	// nothing: see SampleSequencesInto.
	Stack []FrameStack
}

// maxRejections bounds the redraws of a start that lands on a boundary
// step before the sampler enumerates the valid starts instead.
const maxRejections = 64

// SampleSequences samples n windows of l consecutive steps uniformly over
// every stored window that lies wholly between a row's oldest step and its
// write cursor (TFUniformReplayBuffer's and Flashbax's sampling, without
// tables). See SampleSequencesInto.
func (b *Buffer) SampleSequences(n, l int, opt SequenceOptions) (*Batch, error) {
	bt := new(Batch)
	if err := b.SampleSequencesInto(bt, n, l, opt); err != nil {
		return nil, err
	}
	return bt, nil
}

// SampleSequencesInto is SampleSequences reusing bt's memory. It fails
// with ErrInvalidArg for n or l below 1 or a batch larger than the sample
// limit (SampleBudget bytes, at most 2^31 steps; stacked frames count K
// times), ErrSequenceLen for l above the capacity, ErrConfig for a bad
// opt.Stack (see stackPlan; and a stack past the window: l+K-1 above the
// capacity, so that a window and the frames before it could never be
// stored together), and ErrEmpty when no row holds a valid window. Every
// check but ErrEmpty runs before the call draws (the buffer's sequence
// of draws is unchanged) and leaves bt as it was.
func (b *Buffer) SampleSequencesInto(bt *Batch, n, l int, opt SequenceOptions) error {
	if n <= 0 || l <= 0 || bt == nil {
		return fmt.Errorf("%w: sample of %d sequences of %d steps", ErrInvalidArg, n, l)
	}
	if int64(l) > b.capacity {
		return fmt.Errorf("%w: sequence of %d steps, capacity %d", ErrSequenceLen, l, b.capacity)
	}
	plan, err := b.seqStackPlan(opt.Stack, l, &bt.splan)
	if err != nil {
		return err
	}
	if err := b.checkSampleSize("sample of sequences", b.stackPart(plan), int64(n), int64(l), b.seqStepBytes(plan)); err != nil {
		return err
	}
	b.mu.RLock()
	defer b.mu.RUnlock()
	if b.closed {
		return fmt.Errorf("%w: SampleSequences", ErrClosed)
	}
	prefix, total := b.windowCounts(&bt.prefix, int64(l))
	if total == 0 {
		return fmt.Errorf("%w: no row holds %d steps", ErrEmpty, l)
	}
	// Draw into the batch's private scratch first: a draw can fail only
	// before anything visible has changed.
	wins := grow(&bt.wins, n)
	var valid []Window // enumerated only when rejection keeps failing
	d, per := b.newCall(), evenRows(prefix)
	first := d.first(&bt.draws, n)
	// Even rows without boundaries nor lost stacks to avoid: the windows,
	// items and weights are written in one loop once the batch has room.
	even := per > 0 && !opt.EpisodeAware && plan == nil
	drawn := 0
	if even {
		drawn = n
	}
	// A window whose first step's stack reaches an overwritten step is
	// none (FrameStack); without stacking sk is 1 and every start is kept.
	sk := stackMax(plan)
	ok := func(w Window) bool {
		return (!opt.EpisodeAware || !b.isBoundary(int(w.Row), w.Start)) && b.stackKept(int(w.Row), w.Start, sk)
	}
	for k := drawn; k < n; k++ {
		w := b.drawStart(prefix, per, int64(philox.Index(first[k], uint64(total))))
		found := ok(w)
		for try := 1; try < maxRejections && !found; try++ {
			w = b.drawStart(prefix, per, d.index(try, k, total))
			found = ok(w)
		}
		if !found {
			if valid == nil {
				if plan == nil {
					valid = b.validStarts(int64(l))
				} else {
					valid = b.keptStarts(int64(l), ok)
				}
				if len(valid) == 0 {
					return fmt.Errorf("%w: every window of %d steps starts at a boundary (or has a frame stack reaching overwritten steps)", ErrEmpty, l)
				}
			}
			w = valid[d.index(fallbackStream, k, int64(len(valid)))]
		}
		w.Len = int64(l)
		if opt.EpisodeAware {
			w.Len = b.episodeLen(int(w.Row), w.Start, int64(l))
		}
		wins[k] = w
	}
	realloc, err := b.preparePlan(bt, n, l, plan)
	if err != nil {
		return err
	}
	bt.retireMeta() // a device-selected sample's keys and weights are not this sample's
	bt.Keys, bt.Probabilities = bt.Keys[:0], bt.Probabilities[:0]
	bt.TableSize = 0
	items, weights := grow(&bt.Items, n), grow(&bt.Weights, n)
	if even {
		b.evenWindows(wins, items, weights, first, int64(len(prefix)), per, total, int64(l))
		return b.gather(bt, n, l, realloc)
	}
	for k, w := range wins {
		items[k] = Item{Row: int(w.Row), Start: w.Start, Len: int(w.Len), Pad: l - int(w.Len)}
		weights[k] = 1
	}
	return b.gather(bt, n, l, realloc)
}

// windowCounts fills *scratch with the prefix sums over rows of the
// number of windows of l steps each row holds, and returns it and the
// total.
func (b *Buffer) windowCounts(scratch *[]int64, l int64) ([]int64, int64) {
	p := (*scratch)[:0]
	var total int64
	for r := range b.numEnvs {
		total += max(0, b.cursor[r]-b.oldest(r)-l+1)
		p = append(p, total)
	}
	*scratch = p
	return p, total
}

// evenRows returns the number of windows every row holds when all rows
// hold the same number (the common case of full rows), else 0.
func evenRows(prefix []int64) int64 {
	if len(prefix) == 0 {
		return 0
	}
	per := prefix[0]
	for i, p := range prefix {
		if p != int64(i+1)*per {
			return 0
		}
	}
	return per
}

// evenWindows sets wins[k] to window Index(xs[k], total) of rows rows
// that hold per windows each (total = rows*per), with length l, and
// items[k] and weights[k] to its item and weight 1: the first draws of a
// sample from even rows without episode boundaries to avoid. A window's
// row is Index(x, rows), the same number as that index divided by per
// (floor(floor(x*rows*per/2^64)/per) = floor(x*rows/2^64)), so no draw
// pays a division by per; items and weights are written in the same loop.
//
// A window's Start is the ring slot of its first step (its row's oldest
// slot plus an offset below the capacity, wrapped with a compare), while
// its item keeps the absolute step: the gather reads slot Start %
// capacity either way, and skips its division per window when Start is
// a slot already. Each row's oldest step and slot are found once per
// call for up to maxSlotRows rows, and per draw past that.
func (b *Buffer) evenWindows(wins []Window, items []Item, weights []float64, xs []uint64, rows, per, total, l int64) {
	items, weights = items[:len(xs)], weights[:len(xs)]
	wins = wins[:len(xs)]
	var firsts [maxSlotRows]rowFirst
	table := rows <= maxSlotRows
	if table {
		for r := range int(rows) {
			firsts[r] = b.rowFirst(r)
		}
	}
	for k, x := range xs {
		u := int64(philox.Index(x, uint64(total)))
		r := int64(philox.Index(x, uint64(rows)))
		off := u - r*per // in [0, per), and per <= capacity
		f := firsts[r&(maxSlotRows-1)]
		if !table {
			f = b.rowFirst(int(r))
		}
		slot := f.slot + off
		if slot >= b.capacity {
			slot -= b.capacity
		}
		wins[k] = Window{Row: r, Start: slot, Len: l}
		items[k] = Item{Row: int(r), Start: f.step + off, Len: int(l)}
		weights[k] = 1
	}
}

// maxSlotRows bounds the rows whose rowFirst evenWindows keeps in a table
// on the stack (a power of two).
const maxSlotRows = 64

// rowFirst is a row's oldest stored step and its ring slot.
type rowFirst struct{ step, slot int64 }

func (b *Buffer) rowFirst(row int) rowFirst {
	o := b.oldest(row)
	return rowFirst{o, o % b.capacity}
}

// evenWindow is one window of evenWindows, of length 0.
func (b *Buffer) evenWindow(x uint64, rows, per, total int64) Window {
	u := int64(philox.Index(x, uint64(total)))
	r := int64(philox.Index(x, uint64(rows)))
	return Window{Row: r, Start: b.oldest(int(r)) + u - r*per}
}

// drawStart returns window u of those counted by the prefix sums; per is
// evenRows(prefix).
func (b *Buffer) drawStart(prefix []int64, per, u int64) Window {
	if per > 0 {
		// Every row holds per windows: a division, not a search (the
		// search's mispredicted branches were 14% of a B=256 L=1 sample
		// from a cached 10k-step buffer).
		r := u / per
		return Window{Row: r, Start: b.oldest(int(r)) + u - r*per}
	}
	// The first row whose prefix sum passes u: sort.Search's loop written
	// out, without its closure call per step.
	r, hi := 0, len(prefix)
	for r < hi {
		m := int(uint(r+hi) >> 1)
		if prefix[m] > u {
			hi = m
		} else {
			r = m + 1
		}
	}
	before := int64(0)
	if r > 0 {
		before = prefix[r-1]
	}
	return Window{Row: int64(r), Start: b.oldest(r) + u - before}
}

// isBoundary reports whether the stored step ends its stream of
// trajectory: a boundary step (step_type Last), or a step followed by a
// cut (see metaCut). Neither starts a transition.
func (b *Buffer) isBoundary(row int, pos int64) bool {
	m := b.metaAt(row, pos)
	return StepType(m&metaStepMask) == Last || m&metaCut != 0
}

// episodeLen returns how many of the l steps from start belong to the
// start's episode, its boundary step included.
func (b *Buffer) episodeLen(row int, start, l int64) int64 {
	for t := int64(0); t < l; t++ {
		if b.isBoundary(row, start+t) {
			return t + 1
		}
	}
	return l
}

// validStarts enumerates the windows of l steps that do not start at a
// boundary step.
func (b *Buffer) validStarts(l int64) []Window {
	var out []Window
	for r := range b.numEnvs {
		for s := b.oldest(r); s+l <= b.cursor[r]; s++ {
			if !b.isBoundary(r, s) {
				out = append(out, Window{Row: int64(r), Start: s})
			}
		}
	}
	return out
}
