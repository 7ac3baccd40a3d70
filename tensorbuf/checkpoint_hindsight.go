package tensorbuf

import (
	"fmt"
	"io"
	"math"

	"github.com/trajring/trajring/tensorbuf/internal/ckptio"
)

// maxCkptGoal bounds the goal length a hindsight checkpoint may declare.
const maxCkptGoal = 1 << 20

// Save writes the relabeler's state to w, in a checkpoint stream of its
// own (the buffer's checkpoint, Buffer.Save, does not hold it): the
// stored relabeled experiences (step, goal, reward, IsDone and table item
// key), every row's scan position, and the state of its random source.
// The configuration is not saved (its Reward and IsDone are functions):
// LoadHindsight takes it again. Save the relabeler right after the
// buffer, with no writer or Generate in between, so that both describe
// the same cut. It is safe for concurrent use.
func (hs *Hindsight) Save(w io.Writer) error {
	if w == nil {
		return fmt.Errorf("%w: Save to a nil writer", ErrInvalidArg)
	}
	hs.mu.Lock()
	defer hs.mu.Unlock()
	b := hs.b
	b.mu.RLock()
	if b.closed {
		b.mu.RUnlock()
		return fmt.Errorf("%w: hindsight Save", ErrClosed)
	}
	hs.pruneLocked()
	b.mu.RUnlock()
	rng, err := hs.pcg.MarshalBinary()
	if err != nil {
		return fmt.Errorf("checkpoint: hindsight rng: %w", err)
	}
	cw, err := ckptio.NewWriter(w, false)
	if err != nil {
		return err
	}
	defer cw.Close()
	s := cw.Section(ckptio.SecHindsight, 0)
	s.U64(uint64(len(hs.rows)))
	s.U64(uint64(len(hs.ach.idx)))
	s.Bytes(rng)
	for r := range hs.rows {
		row := &hs.rows[r]
		s.I64(row.scanned)
		s.I64(row.epStart)
		s.U64(uint64(len(row.items) - row.head))
		for _, it := range row.items[row.head:] {
			s.I64(it.t)
			for _, g := range it.goal {
				s.F64(g)
			}
			s.U32(math.Float32bits(it.reward))
			s.U8(it.done)
			s.U64(it.key)
		}
	}
	if err := s.Close(); err != nil {
		return err
	}
	return cw.End()
}

// LoadHindsight reads a relabeler saved by Hindsight.Save and returns it
// over b (the buffer restored from the checkpoint saved with it) with
// cfg (the configuration it was made with, its Table being b's restored
// table of that name): it then generates, samples and exports exactly
// what the saved one would have. cfg is validated as by NewHindsight,
// except that its Table may hold items (those the saved relabeler
// inserted). A stream that is not such a checkpoint, or that does not fit
// b (rows, goal size, steps the buffer does not hold, item keys without
// a table), fails with an error wrapping ErrCorrupt. It is safe for
// concurrent use.
func LoadHindsight(r io.Reader, b *Buffer, cfg HindsightConfig) (*Hindsight, error) {
	if r == nil {
		return nil, fmt.Errorf("%w: LoadHindsight from a nil reader", ErrInvalidArg)
	}
	hs, err := newHindsight(b, cfg, true)
	if err != nil {
		return nil, err
	}
	cr, err := ckptio.NewReader(r)
	if err != nil {
		return nil, err
	}
	defer cr.Close()
	s := cr.Section(ckptio.SecHindsight, 0)
	if n := s.Count("rows", maxArenaBytes); s.Err() == nil && n != b.numEnvs {
		s.Fail("%d rows, the buffer has %d", n, b.numEnvs)
	}
	if n := s.Count("goal size", maxCkptGoal); s.Err() == nil && n != len(hs.ach.idx) {
		s.Fail("goals of %d elements, the configuration's have %d", n, len(hs.ach.idx))
	}
	if err := hs.pcg.UnmarshalBinary(s.Bytes(maxCkptRNG)); err != nil && s.Err() == nil {
		s.Fail("rng: %v", err)
	}
	b.mu.RLock()
	cursors := make([]int64, b.numEnvs)
	copy(cursors, b.cursor)
	b.mu.RUnlock()
	for row := 0; row < b.numEnvs && s.Err() == nil; row++ {
		hr := &hs.rows[row]
		hr.scanned, hr.epStart = s.I64(), s.I64()
		if s.Err() == nil && (hr.scanned < 0 || hr.scanned > cursors[row] || hr.epStart < 0 || hr.epStart > hr.scanned) {
			s.Fail("row %d: scanned %d, episode start %d, cursor %d", row, hr.scanned, hr.epStart, cursors[row])
		}
		n := s.Count("relabels", maxCkptSlots)
		for i := 0; i < n && s.Err() == nil; i++ {
			it := relabel{t: s.I64(), goal: make([]float64, len(hs.ach.idx))}
			for k := range it.goal {
				it.goal[k] = s.F64()
			}
			it.reward = math.Float32frombits(s.U32())
			it.done = s.U8()
			it.key = s.U64()
			switch {
			case s.Err() != nil:
			case it.t < max(0, cursors[row]-b.capacity) || it.t >= hr.scanned:
				s.Fail("row %d: relabel of step %d outside the %d scanned steps", row, it.t, hr.scanned)
			case len(hr.items) > 0 && it.t < hr.items[len(hr.items)-1].t:
				s.Fail("row %d: relabels out of order", row)
			case it.done > uint8(Truncated):
				s.Fail("row %d: IsDone %d", row, it.done)
			case it.key != 0 && cfg.Table == nil:
				s.Fail("row %d: relabel of step %d has an item key, the configuration no table", row, it.t)
			}
			hr.items = append(hr.items, it)
			if it.key != 0 {
				hs.byKey[it.key] = it
			}
		}
	}
	if err := s.Done(); err != nil {
		return nil, err
	}
	if err := cr.End(); err != nil {
		return nil, err
	}
	return hs, nil
}
