package remote

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"
)

// TestScarceRowsLoseNothing has three actors of 2 rows take turns on a
// buffer of 2 rows, with a reorder buffer of one frame, so that frames of
// an actor waiting for rows are handed back (Nak, redelivered a second
// later) while its later frames are held:
//
//	A0 A1 | B0 B1 B2 B3 | A bye | B4 | (400 ms) D0 | B bye | D1
//
// B waits for A's rows: B0 is held, B1..B3 are handed back. A's bye lets
// B in (B0 written); B4 is held behind B1..B3; D0, stored more than
// GapTimeout after B4, advances stream time past B4's wait. The ingester
// used to give B1..B3 up as a gap there (cutting the row, then dropping
// them as duplicates when they came again: 24 steps lost, one gap per
// row); a predecessor handed back always comes again, so B4 now waits for
// it. Every actor's steps are written exactly once.
func TestScarceRowsLoseNothing(t *testing.T) {
	t.Parallel()
	srv := startServer(t, t.TempDir(), -1)
	defer srv.Shutdown()
	_, js := connect(t, srv.ClientURL())
	ensure(t, js, StreamConfig{Memory: true})
	buf := newEpisodeBuffer(t, 2, 64)
	s, _ := NewSchema(buf.Fields())
	const a, b, d = 0xa, 0xb, 0xd
	fa, fb, fd := handFramesOf(s, a, 2), handFramesOf(s, b, 5), handFramesOf(s, d, 2)
	in, _ := runIngester(t, IngesterConfig{JetStream: js, Buffer: buf, NewObserver: episodeFactory,
		ReorderBytes: len(fb[0]), GapTimeout: 300 * time.Millisecond, GapDelay: 20 * time.Millisecond})
	pub := func(actor uint64, data ...[]byte) {
		t.Helper()
		for _, m := range data {
			if _, err := js.Publish(context.Background(), fmt.Sprintf("%s.%016x", DefaultSubject, actor), m); err != nil {
				t.Fatal(err)
			}
		}
	}
	pub(a, fa...)
	pub(b, fb[:4]...)
	pub(a, s.EncodeBye(a, 2, 2))
	pub(b, fb[4])
	time.Sleep(400 * time.Millisecond)
	pub(d, fd[0])
	pub(b, s.EncodeBye(b, 5, 2))
	pub(d, fd[1])

	const steps = (2 + 5 + 2) * 4 * 2 // frames x K x rows
	// D comes last (after B's bye): once both of its frames are handled,
	// everything is.
	waitFor(t, 20*time.Second, "D's frames", func() bool {
		as := in.State().Actors
		return len(as) == 1 && as[0].ID == d && as[0].NextFrame == 2
	})
	time.Sleep(100 * time.Millisecond) // nothing more may come
	st := in.Stats()
	want := IngesterStats{Frames: 9, Steps: steps, Bytes: st.Bytes, Deferred: st.Deferred, Held: st.Held, Joins: 3, Leaves: 2}
	if st != want {
		t.Fatalf("stats %+v, want %+v", st, want)
	}
	if got := buf.Cursor(0) + buf.Cursor(1); got != steps {
		t.Fatalf("buffer %d steps, want %d", got, steps)
	}
	// D keeps the rows with both of its frames written.
	if as := in.State().Actors; !slices.Equal(as[0].Next, []int64{8, 8}) {
		t.Fatalf("actor D's next steps %v, want [8 8]", as[0].Next)
	}
	// Per actor, row 0 plays episodes of 4 steps and row 1 of 5: A and D
	// (8 steps a row) 2+1 whole episodes each, B (20) 5+4; a cut would
	// lose some.
	tb, _ := buf.Table("episodes")
	if got := tb.Size(); got != 3+9+3 {
		t.Fatalf("episode items %d, want 15", got)
	}
	// The frames of B were handed back and came again (else this test
	// did not exercise the fallback).
	if st.Deferred == 0 {
		t.Fatalf("no frame was handed back: %+v", st)
	}
}

// TestWaitingActorIdleSinceItsFrames has actor K wait for the rows of a
// killed actor A (no bye) while stream time passes, then E come:
//
//	A0 K0 | (ActorIdle + 200 ms) E0 E1
//
// E0 makes A idle in stream time: its rows go to K, who waited first (E
// used to take them ahead of K, and K waited until E was idle), and K's
// frame is written. K, killed too, has sent nothing for longer than
// ActorIdle: E1 frees its rows for E (K used to count as idle only from
// its admission, so it kept the rows until E sent frames ActorIdle
// later). The wall-clock check of idle actors is kept out of the way
// (GapDelay 1 min): stream time alone must do it.
func TestWaitingActorIdleSinceItsFrames(t *testing.T) {
	t.Parallel()
	srv := startServer(t, t.TempDir(), -1)
	defer srv.Shutdown()
	_, js := connect(t, srv.ClientURL())
	ensure(t, js, StreamConfig{Memory: true})
	buf := newEpisodeBuffer(t, 2, 64)
	s, _ := NewSchema(buf.Fields())
	const a, k, e = 0xa, 0xc, 0xe
	const idle = 500 * time.Millisecond
	in, _ := runIngester(t, IngesterConfig{JetStream: js, Buffer: buf, NewObserver: episodeFactory, ActorIdle: idle, GapDelay: time.Minute})
	pub := func(actor uint64, data ...[]byte) {
		t.Helper()
		for _, m := range data {
			if _, err := js.Publish(context.Background(), fmt.Sprintf("%s.%016x", DefaultSubject, actor), m); err != nil {
				t.Fatal(err)
			}
		}
	}
	pub(a, handFramesOf(s, a, 1)...)
	pub(k, handFramesOf(s, k, 1)...)
	time.Sleep(idle + 200*time.Millisecond)
	pub(e, handFramesOf(s, e, 2)...)
	const steps = (1 + 1 + 2) * 4 * 2
	waitFor(t, 5*time.Second, "every step", func() bool { return in.Stats().Steps == steps })
	st := in.Stats()
	want := IngesterStats{Frames: 4, Steps: steps, Bytes: st.Bytes, Held: st.Held, Joins: 3, Leaves: 2}
	if st != want {
		t.Fatalf("stats %+v, want %+v", st, want)
	}
	if as := in.State().Actors; len(as) != 1 || as[0].ID != e || !slices.Equal(as[0].Next, []int64{8, 8}) {
		t.Fatalf("actors %+v, want E alone with 8 steps per row", as)
	}
}

// TestByeWaitsForHandedBackFrames fills the reorder buffer (one frame)
// with C's frame so that B's only frame and then its bye are handed back
// while B waits for rows:
//
//	A0 C0 B0 Bbye Abye Cbye
//
// The bye of an actor that had no rows and held nothing used to be
// acknowledged and dropped: B0 then came again, B joined and kept its
// rows for good (ActorIdle 0). A bye is now dropped only when none of the
// actor's frames is handed back; B leaves after B0 is written.
func TestByeWaitsForHandedBackFrames(t *testing.T) {
	t.Parallel()
	srv := startServer(t, t.TempDir(), -1)
	defer srv.Shutdown()
	_, js := connect(t, srv.ClientURL())
	ensure(t, js, StreamConfig{Memory: true})
	buf := newEpisodeBuffer(t, 2, 64)
	s, _ := NewSchema(buf.Fields())
	const a, b, c = 0xa, 0xb, 0xc
	fa, fb, fc := handFramesOf(s, a, 1), handFramesOf(s, b, 1), handFramesOf(s, c, 1)
	in, _ := runIngester(t, IngesterConfig{JetStream: js, Buffer: buf, NewObserver: episodeFactory, ReorderBytes: len(fc[0]), GapDelay: 20 * time.Millisecond})
	for _, m := range []struct {
		actor uint64
		data  []byte
	}{{a, fa[0]}, {c, fc[0]}, {b, fb[0]}, {b, s.EncodeBye(b, 1, 2)}, {a, s.EncodeBye(a, 1, 2)}, {c, s.EncodeBye(c, 1, 2)}} {
		if _, err := js.Publish(context.Background(), fmt.Sprintf("%s.%016x", DefaultSubject, m.actor), m.data); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, 10*time.Second, "B's frame", func() bool { return in.Stats().Steps == 24 })
	waitFor(t, 5*time.Second, "B's bye", func() bool { return in.Stats().Leaves == 3 })
	st := in.Stats()
	want := IngesterStats{Frames: 3, Steps: 24, Bytes: st.Bytes, Deferred: st.Deferred, Held: st.Held, Joins: 3, Leaves: 3}
	if st != want || st.Deferred < 2 {
		t.Fatalf("stats %+v, want %+v with B's frame and bye handed back", st, want)
	}
	if as := in.State().Actors; len(as) != 0 {
		t.Fatalf("actors %+v keep rows after their bye", as)
	}
}

// TestHandedBackFrameDiscarded runs TestScarceRowsLoseNothing's stream
// but deletes B2 from the stream while it is handed back, so it never
// comes again. Waiting for every frame handed back would then stall B for
// good (B4 waits for B3, handed back again and again while B4 fills the
// reorder buffer, which waits for B2). A frame handed back that has not
// come again for AckWait + GapTimeout is forgotten; B2 alone is given up
// (one cut per row) and B3, B4 are written when they come.
func TestHandedBackFrameDiscarded(t *testing.T) {
	t.Parallel()
	srv := startServer(t, t.TempDir(), -1)
	defer srv.Shutdown()
	_, js := connect(t, srv.ClientURL())
	ensure(t, js, StreamConfig{Memory: true})
	buf := newEpisodeBuffer(t, 2, 64)
	s, _ := NewSchema(buf.Fields())
	const a, b, d = 0xa, 0xb, 0xd
	fa, fb, fd := handFramesOf(s, a, 2), handFramesOf(s, b, 5), handFramesOf(s, d, 2)
	in, _ := runIngester(t, IngesterConfig{JetStream: js, Buffer: buf, NewObserver: episodeFactory, AckWait: time.Second,
		ReorderBytes: len(fb[0]), GapTimeout: 300 * time.Millisecond, GapDelay: 20 * time.Millisecond})
	seqs := map[string]uint64{}
	pub := func(name string, actor uint64, data []byte) {
		t.Helper()
		ack, err := js.Publish(context.Background(), fmt.Sprintf("%s.%016x", DefaultSubject, actor), data)
		if err != nil {
			t.Fatal(err)
		}
		seqs[name] = ack.Sequence
	}
	pub("A0", a, fa[0])
	pub("A1", a, fa[1])
	for i := range 4 {
		pub(fmt.Sprintf("B%d", i), b, fb[i])
	}
	// B2 cannot be written before A's bye: deleted now, it is handed back
	// (or on its way back, to be handed back again) and never comes again.
	waitFor(t, 5*time.Second, "B1..B3 handed back", func() bool { return in.Stats().Deferred >= 3 })
	st, err := js.Stream(context.Background(), DefaultStream)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.DeleteMsg(context.Background(), seqs["B2"]); err != nil {
		t.Fatal(err)
	}
	pub("Abye", a, s.EncodeBye(a, 2, 2))
	pub("B4", b, fb[4])
	time.Sleep(400 * time.Millisecond)
	pub("D0", d, fd[0])
	pub("Bbye", b, s.EncodeBye(b, 5, 2))
	pub("D1", d, fd[1])

	waitFor(t, 20*time.Second, "D's frames", func() bool {
		as := in.State().Actors
		return len(as) == 1 && as[0].ID == d && as[0].NextFrame == 2
	})
	time.Sleep(100 * time.Millisecond)
	const steps = (2 + 4 + 2) * 4 * 2 // B2 lost
	got := in.Stats()
	want := IngesterStats{Frames: 8, Steps: steps, Bytes: got.Bytes, Dead: 1, Gaps: 2, Deferred: got.Deferred, Held: got.Held, Joins: 3, Leaves: 2}
	if got != want {
		t.Fatalf("stats %+v, want %+v", got, want)
	}
	if n := buf.Cursor(0) + buf.Cursor(1); n != steps {
		t.Fatalf("buffer %d steps, want %d", n, steps)
	}
	// A and D 3 episodes each; B row 0 (episodes of 4) 0-3, 4-7, 12-15,
	// 16-19, row 1 (of 5) 0-4, 15-19 and 12-14, the end of an episode
	// begun in B2: its own item after the cut, not crossing it.
	tb, _ := buf.Table("episodes")
	if n := tb.Size(); n != 3+3+4+3 {
		t.Fatalf("episode items %d, want 13", n)
	}
}

// TestIdleActorLateCopy frees actor A as idle (stream time), then gets a
// late copy of its frame A1 (as a redelivery whose acknowledgement a
// server restart lost) and its next frame A2:
//
//	A0 A1 | (ActorIdle + 200 ms) E0 A1' A2
//
// The copy used to make A join again as a new actor and be written twice
// after a cut (the 2-minute soak with server restarts wrote 30 steps more
// than were published). A is remembered with its next frame: A1' is a
// duplicate, and A2 makes it join again, written at once after a cut (no
// wait for A0 and A1 on its new rows).
func TestIdleActorLateCopy(t *testing.T) {
	t.Parallel()
	srv := startServer(t, t.TempDir(), -1)
	defer srv.Shutdown()
	_, js := connect(t, srv.ClientURL())
	ensure(t, js, StreamConfig{Memory: true})
	buf := newEpisodeBuffer(t, 4, 64)
	s, _ := NewSchema(buf.Fields())
	const a, e = 0xa, 0xe
	const idle = 500 * time.Millisecond
	// GapDelay 1 min keeps the wall-clock checks (idle actors, gap
	// timeouts) out of the way: stream time alone decides.
	in, _ := runIngester(t, IngesterConfig{JetStream: js, Buffer: buf, NewObserver: episodeFactory, ActorIdle: idle, GapTimeout: idle, GapDelay: time.Minute})
	pub := func(actor uint64, data ...[]byte) {
		t.Helper()
		for _, m := range data {
			if _, err := js.Publish(context.Background(), fmt.Sprintf("%s.%016x", DefaultSubject, actor), m); err != nil {
				t.Fatal(err)
			}
		}
	}
	fa := handFramesOf(s, a, 3)
	pub(a, fa[0], fa[1])
	time.Sleep(idle + 200*time.Millisecond)
	pub(e, handFramesOf(s, e, 1)...)
	pub(a, fa[1], fa[2])
	waitFor(t, 10*time.Second, "A2", func() bool {
		for _, as := range in.State().Actors {
			if as.ID == a && as.NextFrame == 3 {
				return true
			}
		}
		return false
	})
	time.Sleep(100 * time.Millisecond)
	st := in.Stats()
	want := IngesterStats{Frames: 4, Steps: 32, Bytes: st.Bytes, Duplicates: 8, DupFrames: 1, Dead: 1, Gaps: 2, Joins: 3, Leaves: 1}
	if st != want {
		t.Fatalf("stats %+v, want %+v", st, want)
	}
	// A: row 0 (episodes of 4) 0-3, 4-7, 8-11; row 1 (of 5) 0-4 and 8-9,
	// the end of an episode begun before the cut. E: row 0 0-3.
	tb, _ := buf.Table("episodes")
	if n := tb.Size(); n != 3+2+1 {
		t.Fatalf("episode items %d, want 6", n)
	}
}
