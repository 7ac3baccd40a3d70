package remote

import (
	"context"
	"testing"
	"time"

	"github.com/trajring/trajring/driver"
	"github.com/trajring/trajring/tensorbuf"
)

// handFrames builds frames 0..n-1 of actor 7 (2 rows, K = 4) by hand,
// as TestBadFramesDupsAndGaps does.
func handFrames(s *Schema, n int) [][]byte { return handFramesOf(s, 7, n) }

// handFramesOf builds frames 0..n-1 of an actor (2 rows, K = 4).
func handFramesOf(s *Schema, actor uint64, n int) [][]byte {
	g := newGen(2)
	var out [][]byte
	for seq := range uint64(n) {
		first := []int64{int64(seq) * 4, int64(seq) * 4}
		p := &Publisher{schema: s, cols: make([][]byte, len(s.colBytes)), batch: 2, actor: actor, cfg: PublisherConfig{StepsPerFrame: 4}}
		p.rows, p.first = []int{0, 1}, first
		for range 4 {
			p.appendStep(g.next())
		}
		data, _ := s.encode(nil, nil, false, actor, seq, 2, []int{0, 1}, first, 4, p.cols)
		out = append(out, data)
	}
	return out
}

// TestReorderHoldsFramesBeforeTheirPredecessor stores frame 1 of an actor
// after frames 2..6 and its bye, on a consumer with a tiny window
// (Prefetch 1). Handing the early frames back used to fill the window
// (MaxAckPending 4) so that frame 1 never came before the gap timeout, and
// the bye freed the rows before frame 1: gaps. Held in the ingester, they
// are written in order once frame 1 comes, and the bye comes last.
func TestReorderHoldsFramesBeforeTheirPredecessor(t *testing.T) {
	t.Parallel()
	srv := startServer(t, t.TempDir(), -1)
	defer srv.Shutdown()
	_, js := connect(t, srv.ClientURL())
	ensure(t, js, StreamConfig{Memory: true})
	buf := newEpisodeBuffer(t, 2, 64)
	in, _ := runIngester(t, IngesterConfig{JetStream: js, Buffer: buf, NewObserver: episodeFactory, Prefetch: 1, GapTimeout: 3 * time.Second, GapDelay: 20 * time.Millisecond})
	s, _ := NewSchema(buf.Fields())
	f := handFrames(s, 7)
	order := [][]byte{f[0], f[2], f[3], f[4], f[5], f[6], s.EncodeBye(7, 7, 2), f[1]}
	for _, data := range order {
		if _, err := js.Publish(context.Background(), DefaultSubject+".0000000000000007", data); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, 10*time.Second, "the bye", func() bool { return in.Stats().Leaves == 1 })
	st := in.Stats()
	want := IngesterStats{Frames: 7, Steps: 56, Bytes: st.Bytes, Held: 6, Joins: 1, Leaves: 1}
	if st != want {
		t.Fatalf("stats %+v, want %+v", st, want)
	}
	if got := buf.Cursor(0) + buf.Cursor(1); got != 56 {
		t.Fatalf("buffer %d steps, want 56", got)
	}
	if n := len(in.State().Actors); n != 0 {
		t.Fatalf("%d actors keep rows after the bye", n)
	}
	// Row 0 plays episodes of 4 steps (7 whole), row 1 of 5 (5 whole of
	// its 28 steps): nothing was cut.
	tb, _ := buf.Table("episodes")
	if got := tb.Size(); got != 7+5 {
		t.Fatalf("episode items %d, want 12", got)
	}
}

// slowObserver sleeps before each step, as a learner busy elsewhere.
type slowObserver struct {
	RowObserver
	d time.Duration
}

func (s slowObserver) Observe(t *driver.Trajectory) error {
	time.Sleep(s.d)
	return s.RowObserver.Observe(t)
}

// TestActorIdleInStreamTime writes an actor's frames slower than
// ActorIdle while they were stored within milliseconds: the actor is not
// idle (it used to be freed between two frames by the wall clock, then
// joined again with a gap).
func TestActorIdleInStreamTime(t *testing.T) {
	t.Parallel()
	srv := startServer(t, t.TempDir(), -1)
	defer srv.Shutdown()
	_, js := connect(t, srv.ClientURL())
	ensure(t, js, StreamConfig{Memory: true})
	buf := newTestBuffer(t, 4, 64)
	slow := func(b *tensorbuf.Buffer, rows []int) (RowObserver, error) {
		o, err := PlainObserver(b, rows)
		return slowObserver{o, 150 * time.Millisecond}, err
	}
	in, _ := runIngester(t, IngesterConfig{JetStream: js, Buffer: buf, NewObserver: slow, ActorIdle: 200 * time.Millisecond, GapTimeout: time.Second})
	publishSteps(t, js, buf, newGen(2), 6, 2, false) // 3 frames, 300 ms each to write
	waitFor(t, 10*time.Second, "12 steps", func() bool { return in.Stats().Steps == 12 })
	if st := in.Stats(); st.Joins != 1 || st.Gaps != 0 || st.Dead != 0 || st.Duplicates != 0 {
		t.Fatalf("stats %+v: want one join, no gap", st)
	}
}
