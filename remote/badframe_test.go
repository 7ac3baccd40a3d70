package remote

import (
	"context"
	"testing"
	"time"
)

// TestBadFramesDupsAndGaps publishes, by hand, frames that are malformed,
// of a foreign schema, redelivered copies and a frame after a lost one.
func TestBadFramesDupsAndGaps(t *testing.T) {
	t.Parallel()
	srv := startServer(t, t.TempDir(), -1)
	defer srv.Shutdown()
	_, js := connect(t, srv.ClientURL())
	ensure(t, js, StreamConfig{Memory: true})
	buf := newEpisodeBuffer(t, 2, 64)
	in, _ := runIngester(t, IngesterConfig{JetStream: js, Buffer: buf, NewObserver: episodeFactory, GapTimeout: 200 * time.Millisecond, GapDelay: 20 * time.Millisecond})
	s, _ := NewSchema(buf.Fields())

	// Build frames of one actor, 2 rows, K = 4, by hand from the generator.
	g := newGen(2)
	frame := func(sc *Schema, seq uint64) []byte {
		cols := make([][]byte, len(sc.colBytes))
		p := &Publisher{schema: sc, cols: cols, batch: 2, next: []int64{int64(seq) * 4, int64(seq) * 4}, actor: 7, cfg: PublisherConfig{StepsPerFrame: 4}}
		p.rows, p.first = []int{0, 1}, []int64{int64(seq) * 4, int64(seq) * 4}
		for range 4 {
			tr := g.next()
			_ = tr
			p.appendStep(tr)
		}
		data, _ := sc.encode(nil, nil, false, 7, seq, 2, []int{0, 1}, []int64{int64(seq) * 4, int64(seq) * 4}, 4, p.cols)
		return data
	}
	f0, f1, f2 := frame(s, 0), frame(s, 1), frame(s, 2)
	foreignHash := func(f []byte) []byte {
		c := append([]byte{}, f...)
		c[8] ^= 0xff
		return c
	}
	pub := func(data []byte) {
		t.Helper()
		if _, err := js.Publish(context.Background(), DefaultSubject+".0000000000000007", data); err != nil {
			t.Fatal(err)
		}
	}
	bad := [][]byte{
		[]byte("not a frame"),
		foreignHash(f0),
		f0[:len(f0)-1],                     // short body
		append(append([]byte{}, f0...), 0), // long body
		// R*12 + R*K*40 wraps 64 bits to the 8 bytes of the body: rows 0
		// and 1, then row 2 past the end.
		rawFrame(s, 0, 544370738, 544370738, 2541477175, []byte{0, 0, 0, 0, 1, 0, 0, 0}),
	}
	for _, b := range bad {
		pub(b)
	}
	waitFor(t, 5*time.Second, "bad frames refused", func() bool { return in.Stats().Dead == int64(len(bad)) })
	if got := buf.Stats().Steps; got != 0 {
		t.Fatalf("bad frames wrote %d steps", got)
	}
	pub(f0)
	pub(f0) // a redelivered copy under another message id
	waitFor(t, 5*time.Second, "duplicate dropped", func() bool { return in.Stats().DupFrames == 1 })
	if got := buf.Cursor(0) + buf.Cursor(1); got != 8 {
		t.Fatalf("after a duplicate: %d steps, want 8", got)
	}
	// f1 is lost: f2 is held back, then written after a cut.
	pub(f2)
	waitFor(t, 5*time.Second, "gap accepted", func() bool { return in.Stats().Gaps == 2 })
	if got := buf.Cursor(0) + buf.Cursor(1); got != 16 {
		t.Fatalf("after the gap: %d steps, want 16", got)
	}
	// Row 0 (episodes of 4 steps with the boundary): 0-3 and 8-11, whole.
	// Row 1 (5): 0-4 lacks the lost step 4 and makes no item; after the
	// cut the fresh observer sees 8-9 (the end of episode 5-9) and 10-11:
	// one item [8 9], which starts after the gap. Without the cut it
	// would be [0..3 8 9], across the gap.
	tb, _ := buf.Table("episodes")
	if got, want := tb.Size(), 3; got != want {
		t.Fatalf("episode items %d, want %d", got, want)
	}
	// Row 0's step 3 is a boundary that step 8 (First) would continue:
	// marked; row 1's step 3 (next Last) is contradicted by step 8 (Mid).
	if got := buf.Stats().Cuts; got != 2 {
		t.Fatalf("cuts %d, want 2", got)
	}
	st := in.Stats()
	if st.Dead != int64(len(bad))+1 || st.Held != 1 {
		t.Fatalf("stats %+v", st)
	}
	_ = f1
}
