package remote

import (
	"bytes"
	"encoding/binary"
	"math"
	"testing"

	"github.com/trajring/trajring/tensorbuf"
)

// TestPlainWriterMatchesObserver writes the same frames (whole, a subset
// of rows in another order, partly written already, after a gap) through
// the default path (plain.go) and through observer.Shared (PlainObserver
// as the factory) into two buffers, and checks that the buffers are
// byte-for-byte equal (saved checkpoints) and the counts exact.
func TestPlainWriterMatchesObserver(t *testing.T) {
	s, err := NewSchema(testFields())
	if err != nil {
		t.Fatal(err)
	}
	// frame returns a frame of the actor's local rows with first steps
	// first and k steps: obs [row, step, 0, 0], action step, reward
	// step, discount 1, step types F->M at step 0, M->M after.
	frame := func(seq uint64, rows []int, first []int64, k int) []byte {
		cols := fullCols(s, len(rows), k)
		le := binary.LittleEndian
		for j := range k {
			for i, r := range rows {
				n := j*len(rows) + i
				step := first[i] + int64(j)
				le.PutUint64(cols[0][8*n:], uint64(step))
				le.PutUint32(cols[1][16*n:], math.Float32bits(float32(r)))
				le.PutUint32(cols[1][16*n+4:], math.Float32bits(float32(step)))
				st := tensorbuf.Mid
				if step == 0 {
					st = tensorbuf.First
				}
				le.PutUint32(cols[2][4*n:], uint32(st))
				le.PutUint32(cols[3][4*n:], uint32(tensorbuf.Mid))
				le.PutUint32(cols[4][4*n:], math.Float32bits(float32(step)))
				le.PutUint32(cols[5][4*n:], math.Float32bits(1))
			}
		}
		data, _ := s.encode(nil, nil, false, 9, seq, 4, rows, first, k, cols)
		return data
	}
	frames := []struct {
		data []byte
		gap  bool
	}{
		{frame(0, []int{0, 1, 2, 3}, []int64{0, 0, 0, 0}, 5), false},
		{frame(1, []int{2, 0}, []int64{5, 5}, 3), false},             // a subset, reversed
		{frame(2, []int{0, 1, 2, 3}, []int64{6, 5, 6, 5}, 4), false}, // rows 0 and 2: 2 steps written already
		{frame(3, []int{1}, []int64{12}, 2), true},                   // row 1 skips steps 9-11
	}
	type result struct {
		stats IngesterStats
		buf   tensorbuf.Stats
		saved []byte
	}
	run := func(factory ObserverFactory) result {
		buf := newTestBuffer(t, 6, 16)
		in := &Ingester{cfg: IngesterConfig{Buffer: buf, NewObserver: factory, Rows: []int{0, 1, 2, 3, 4, 5}}, schema: s}
		a := &actorState{id: 9, rows: []int{5, 1, 2, 4}, next: make([]int64, 4)}
		if err := in.open(a); err != nil {
			t.Fatal(err)
		}
		if _, plain := a.obs.(*plainWriter); plain != (factory == nil) {
			t.Fatalf("observer %T with factory %v", a.obs, factory != nil)
		}
		var f Frame
		for _, fr := range frames {
			if err := s.Decode(fr.data, &f); err != nil {
				t.Fatal(err)
			}
			if fr.gap {
				if err := in.cut(a, &f); err != nil {
					t.Fatal(err)
				}
			}
			in.write(a, &f)
		}
		if err := a.obs.Close(); err != nil {
			t.Fatal(err)
		}
		var b bytes.Buffer
		if err := buf.Save(&b, tensorbuf.SaveOptions{}); err != nil {
			t.Fatal(err)
		}
		return result{in.stats, buf.Stats(), b.Bytes()}
	}
	plain, obs := run(nil), run(PlainObserver)
	want := IngesterStats{Frames: 4, Steps: 20 + 6 + 12 + 2, Duplicates: 4, Gaps: 1}
	for name, r := range map[string]result{"plain": plain, "observer": obs} {
		if r.stats != want {
			t.Errorf("%s: stats %+v, want %+v", name, r.stats, want)
		}
		if r.buf.Steps != want.Steps || r.buf.Cuts != 1 {
			t.Errorf("%s: buffer stats %+v, want %d steps, 1 cut", name, r.buf, want.Steps)
		}
	}
	if plain.buf != obs.buf {
		t.Errorf("buffer stats: plain %+v, observer %+v", plain.buf, obs.buf)
	}
	if !bytes.Equal(plain.saved, obs.saved) {
		t.Errorf("buffers differ (%d and %d bytes saved)", len(plain.saved), len(obs.saved))
	}
}

// TestPlainWriterObserve checks plainWriter's Observe (the RowObserver
// method) against observer.Shared: the same trajectories, some rows
// inactive, give byte-equal buffers; a trajectory of another batch size
// is refused and writes nothing.
func TestPlainWriterObserve(t *testing.T) {
	rows := []int{3, 0, 2}
	write := func(open func(*tensorbuf.Buffer) (RowObserver, error)) []byte {
		buf := newTestBuffer(t, 4, 16)
		o, err := open(buf)
		if err != nil {
			t.Fatal(err)
		}
		g := newGen(3)
		for i := range 20 {
			tr := g.next()
			tr.Active = []bool{i%3 != 0, true, i%4 != 1}
			if err := o.Observe(tr); err != nil {
				t.Fatal(err)
			}
		}
		if err := o.Observe(newGen(2).next()); err == nil {
			t.Fatal("a trajectory of 2 rows was written by an observer of 3")
		}
		if err := o.Close(); err != nil {
			t.Fatal(err)
		}
		if got := buf.Stats().Steps; got != 13+20+15 {
			t.Fatalf("%d steps written, want 48", got)
		}
		var b bytes.Buffer
		if err := buf.Save(&b, tensorbuf.SaveOptions{}); err != nil {
			t.Fatal(err)
		}
		return b.Bytes()
	}
	s, err := NewSchema(testFields())
	if err != nil {
		t.Fatal(err)
	}
	plain := write(func(b *tensorbuf.Buffer) (RowObserver, error) { return newPlainWriter(b, s.fields, rows) })
	shared := write(func(b *tensorbuf.Buffer) (RowObserver, error) { return PlainObserver(b, rows) })
	if !bytes.Equal(plain, shared) {
		t.Fatal("plainWriter.Observe and observer.Shared wrote different buffers")
	}
}
