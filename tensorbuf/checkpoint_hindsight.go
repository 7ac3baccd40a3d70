package tensorbuf

import (
	"fmt"
	"io"
	"math"
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
	cw, err := newChunkWriter(w, false)
	if err != nil {
		return err
	}
	s := cw.section(secHindsight, 0)
	s.u64(uint64(len(hs.rows)))
	s.u64(uint64(len(hs.ach.idx)))
	s.bytes(rng)
	for r := range hs.rows {
		row := &hs.rows[r]
		s.i64(row.scanned)
		s.i64(row.epStart)
		s.u64(uint64(len(row.items) - row.head))
		for _, it := range row.items[row.head:] {
			s.i64(it.t)
			for _, g := range it.goal {
				s.f64(g)
			}
			s.u32(math.Float32bits(it.reward))
			s.u8(it.done)
			s.u64(it.key)
		}
	}
	if err := s.close(); err != nil {
		return err
	}
	end := cw.section(secEnd, 0)
	end.u64(uint64(cw.seq))
	end.i64(cw.raw)
	return end.close()
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
	cr, err := newChunkReader(r)
	if err != nil {
		return nil, err
	}
	defer cr.close()
	s := cr.section(secHindsight, 0)
	if n := s.count("rows", maxArenaBytes); s.err == nil && n != b.numEnvs {
		s.fail("%d rows, the buffer has %d", n, b.numEnvs)
	}
	if n := s.count("goal size", maxCkptGoal); s.err == nil && n != len(hs.ach.idx) {
		s.fail("goals of %d elements, the configuration's have %d", n, len(hs.ach.idx))
	}
	if err := hs.pcg.UnmarshalBinary(s.bytes(maxCkptRNG)); err != nil && s.err == nil {
		s.fail("rng: %v", err)
	}
	b.mu.RLock()
	cursors := make([]int64, b.numEnvs)
	copy(cursors, b.cursor)
	b.mu.RUnlock()
	for row := 0; row < b.numEnvs && s.err == nil; row++ {
		hr := &hs.rows[row]
		hr.scanned, hr.epStart = s.i64(), s.i64()
		if s.err == nil && (hr.scanned < 0 || hr.scanned > cursors[row] || hr.epStart < 0 || hr.epStart > hr.scanned) {
			s.fail("row %d: scanned %d, episode start %d, cursor %d", row, hr.scanned, hr.epStart, cursors[row])
		}
		n := s.count("relabels", maxCkptSlots)
		for i := 0; i < n && s.err == nil; i++ {
			it := relabel{t: s.i64(), goal: make([]float64, len(hs.ach.idx))}
			for k := range it.goal {
				it.goal[k] = s.f64()
			}
			it.reward = math.Float32frombits(s.u32())
			it.done = s.u8()
			it.key = s.u64()
			switch {
			case s.err != nil:
			case it.t < max(0, cursors[row]-b.capacity) || it.t >= hr.scanned:
				s.fail("row %d: relabel of step %d outside the %d scanned steps", row, it.t, hr.scanned)
			case len(hr.items) > 0 && it.t < hr.items[len(hr.items)-1].t:
				s.fail("row %d: relabels out of order", row)
			case it.done > uint8(Truncated):
				s.fail("row %d: IsDone %d", row, it.done)
			case it.key != 0 && cfg.Table == nil:
				s.fail("row %d: relabel of step %d has an item key, the configuration no table", row, it.t)
			}
			hr.items = append(hr.items, it)
			if it.key != 0 {
				hs.byKey[it.key] = it
			}
		}
	}
	if err := s.done(); err != nil {
		return nil, err
	}
	seq, raw := cr.seq, cr.raw
	e := cr.section(secEnd, 0)
	if gotSeq, gotRaw := e.u64(), e.i64(); e.err == nil && (gotSeq != uint64(seq) || gotRaw != raw) {
		e.fail("%d chunks of %d bytes read, the writer wrote %d of %d", seq, raw, gotSeq, gotRaw)
	}
	if err := e.done(); err != nil {
		return nil, err
	}
	return hs, nil
}
