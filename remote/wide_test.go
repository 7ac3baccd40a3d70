package remote

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/trajring/trajring/tensorbuf"
)

// framesOfRows builds frames 0..n-1 of an actor of rows rows (K = 4).
func framesOfRows(s *Schema, actor uint64, rows, n int) [][]byte {
	g := newGen(rows)
	local := make([]int, rows)
	for i := range local {
		local[i] = i
	}
	var out [][]byte
	for seq := range uint64(n) {
		first := make([]int64, rows)
		for i := range first {
			first[i] = int64(seq) * 4
		}
		p := &Publisher{schema: s, cols: make([][]byte, len(s.colBytes)), batch: rows, actor: actor, cfg: PublisherConfig{StepsPerFrame: 4}}
		p.rows, p.first = local, first
		for range 4 {
			p.appendStep(g.next())
		}
		data, _ := s.encode(nil, nil, false, actor, seq, rows, local, first, 4, p.cols)
		out = append(out, data)
	}
	return out
}

// logBuffer collects what a slog.Logger writes, safely for concurrent use.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// actorOf returns the state of actor id, or false.
func actorOf(in *Ingester, id uint64) (ActorState, bool) {
	for _, a := range in.State().Actors {
		if a.ID == id {
			return a, true
		}
	}
	return ActorState{}, false
}

// TestActorWiderThanLearnerRefused publishes, to a learner of 4 rows,
//
//	A0 (4 rows) | W0 W1 (5 rows) | B0 B1 (2 rows) | A bye
//
// W can never fit. It used to wait for rows forever: its frames were held
// (dead 0, the stream floor pinned below W0), and at the head of the
// admission queue it kept B waiting after A's bye freed every row. W's
// frames are now refused at once (dead letters with the reason, counted
// in Refused, the actor logged once) and B takes A's rows.
func TestActorWiderThanLearnerRefused(t *testing.T) {
	t.Parallel()
	srv := startServer(t, t.TempDir(), -1)
	defer srv.Shutdown()
	_, js := connect(t, srv.ClientURL())
	ensure(t, js, StreamConfig{Memory: true})
	buf := newEpisodeBuffer(t, 4, 64)
	s, _ := NewSchema(buf.Fields())
	var logs logBuffer
	in, _ := runIngester(t, IngesterConfig{JetStream: js, Buffer: buf, NewObserver: episodeFactory,
		Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	const a, w, b = 0xa, 0x5, 0xb
	pub := func(actor uint64, data ...[]byte) {
		t.Helper()
		for _, m := range data {
			if _, err := js.Publish(context.Background(), fmt.Sprintf("%s.%016x", DefaultSubject, actor), m); err != nil {
				t.Fatal(err)
			}
		}
	}
	pub(a, framesOfRows(s, a, 4, 1)...)
	pub(w, framesOfRows(s, w, 5, 2)...)
	pub(b, framesOfRows(s, b, 2, 2)...)
	pub(a, s.EncodeBye(a, 1, 4))
	const steps = 4*4 + 2*2*4
	waitFor(t, 5*time.Second, "B's frames", func() bool {
		st, ok := actorOf(in, b)
		return ok && st.NextFrame == 2
	})
	st := in.Stats()
	want := IngesterStats{Frames: 3, Steps: steps, Bytes: st.Bytes, Dead: 2, Refused: 2, Held: 2, Joins: 2, Leaves: 1}
	if st != want {
		t.Fatalf("stats %+v, want %+v", st, want)
	}
	if got := in.State().StreamFloor; got != 6 {
		t.Fatalf("stream floor %d, want 6 (every frame done)", got)
	}
	if bs, _ := actorOf(in, b); !slices.Equal(bs.Rows, []int{0, 1}) || !slices.Equal(bs.Next, []int64{8, 8}) {
		t.Fatalf("actor B %+v, want rows [0 1] with 8 steps each", bs)
	}
	// Both of W's frames are dead letters that say why.
	ctx := testCtx(t)
	ds, err := js.Stream(ctx, DefaultDeadStream)
	if err != nil {
		t.Fatal(err)
	}
	const reason = "remote: no free rows for the actor: actor 0000000000000005 declares 5 rows, the learner has 4 in all"
	waitFor(t, 5*time.Second, "2 dead letters", func() bool {
		info, err := ds.Info(ctx)
		return err == nil && info.State.Msgs == 2
	})
	for seq := uint64(1); seq <= 2; seq++ {
		m, err := ds.GetMsg(ctx, seq)
		if err != nil {
			t.Fatal(err)
		}
		if got := m.Header.Get("Trajring-Reason"); got != reason {
			t.Fatalf("dead letter %d: reason %q, want %q", seq, got, reason)
		}
		if got, want := m.Header.Get("Trajring-Subject"), DefaultSubject+".0000000000000005"; got != want {
			t.Fatalf("dead letter %d: subject %q, want %q", seq, got, want)
		}
	}
	// Logged once for the actor, not once per frame.
	if got := strings.Count(logs.String(), "actor=0000000000000005"); got != 1 {
		t.Fatalf("actor W logged %d times, want 1:\n%s", got, logs.String())
	}
	if !strings.Contains(logs.String(), "actor_rows=5 learner_rows=4") {
		t.Fatalf("log lacks the row counts:\n%s", logs.String())
	}
}

// TestWaitingActorDoesNotBlockSmaller publishes, to a learner of 4 rows,
//
//	A0 (2 rows) B0 (2 rows) | W0 (3 rows) S0 (1 row) | A bye | B bye
//
// W and S wait for rows. A's bye frees rows 0 and 1: W, waiting first,
// does not fit there, S does. S used to wait behind W until B left too;
// now S takes row 0 at once, and W takes rows 1 to 3 once B leaves.
func TestWaitingActorDoesNotBlockSmaller(t *testing.T) {
	t.Parallel()
	srv := startServer(t, t.TempDir(), -1)
	defer srv.Shutdown()
	_, js := connect(t, srv.ClientURL())
	ensure(t, js, StreamConfig{Memory: true})
	buf := newEpisodeBuffer(t, 4, 64)
	s, _ := NewSchema(buf.Fields())
	in, _ := runIngester(t, IngesterConfig{JetStream: js, Buffer: buf, NewObserver: episodeFactory, GapDelay: 20 * time.Millisecond})
	const a, b, w, sm = 0xa, 0xb, 0xc, 0xd
	pub := func(actor uint64, data ...[]byte) {
		t.Helper()
		for _, m := range data {
			if _, err := js.Publish(context.Background(), fmt.Sprintf("%s.%016x", DefaultSubject, actor), m); err != nil {
				t.Fatal(err)
			}
		}
	}
	pub(a, framesOfRows(s, a, 2, 1)...)
	pub(b, framesOfRows(s, b, 2, 1)...)
	pub(w, framesOfRows(s, w, 3, 1)...)
	pub(sm, framesOfRows(s, sm, 1, 1)...)
	pub(a, s.EncodeBye(a, 1, 2))
	waitFor(t, 3*time.Second, "S's frame after A's bye", func() bool {
		st, ok := actorOf(in, sm)
		return ok && st.NextFrame == 1
	})
	if st, _ := actorOf(in, sm); !slices.Equal(st.Rows, []int{0}) || !slices.Equal(st.Next, []int64{4}) {
		t.Fatalf("actor S %+v, want row 0 with 4 steps", st)
	}
	if _, ok := actorOf(in, w); ok {
		t.Fatal("actor W has rows before B left")
	}
	pub(b, s.EncodeBye(b, 1, 2))
	waitFor(t, 3*time.Second, "W's frame after B's bye", func() bool {
		st, ok := actorOf(in, w)
		return ok && st.NextFrame == 1
	})
	if st, _ := actorOf(in, w); !slices.Equal(st.Rows, []int{1, 2, 3}) || !slices.Equal(st.Next, []int64{4, 4, 4}) {
		t.Fatalf("actor W %+v, want rows [1 2 3] with 4 steps each", st)
	}
	st := in.Stats()
	want := IngesterStats{Frames: 4, Steps: 2*4 + 2*4 + 3*4 + 4, Bytes: st.Bytes, Held: 2, Joins: 4, Leaves: 2}
	if st != want {
		t.Fatalf("stats %+v, want %+v", st, want)
	}
	if got := in.State().StreamFloor; got != 6 {
		t.Fatalf("stream floor %d, want 6", got)
	}
}

// TestActorWithoutObserverRefused has the observer factory fail for
// actors of 3 rows, on a learner of 4 rows:
//
//	X0 (3 rows) | A0 (4 rows) | X1 | A bye | B0 (2 rows)
//
// X0 finds free rows but no observer; X1 waits for A's rows and, when A
// leaves, finds no observer either. Such a join error used to be taken
// for a lack of rows: X's frames were held for good. They are now dead
// letters with the factory's error, logged once, and B goes on.
func TestActorWithoutObserverRefused(t *testing.T) {
	t.Parallel()
	srv := startServer(t, t.TempDir(), -1)
	defer srv.Shutdown()
	_, js := connect(t, srv.ClientURL())
	ensure(t, js, StreamConfig{Memory: true})
	buf := newEpisodeBuffer(t, 4, 64)
	s, _ := NewSchema(buf.Fields())
	errNoObserver := errors.New("no observer for 3 rows")
	factory := func(buf *tensorbuf.Buffer, rows []int) (RowObserver, error) {
		if len(rows) == 3 {
			return nil, errNoObserver
		}
		return episodeFactory(buf, rows)
	}
	var logs logBuffer
	in, _ := runIngester(t, IngesterConfig{JetStream: js, Buffer: buf, NewObserver: factory, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	const x, a, b = 0xc, 0xa, 0xb
	pub := func(actor uint64, data ...[]byte) {
		t.Helper()
		for _, m := range data {
			if _, err := js.Publish(context.Background(), fmt.Sprintf("%s.%016x", DefaultSubject, actor), m); err != nil {
				t.Fatal(err)
			}
		}
	}
	fx := framesOfRows(s, x, 3, 2)
	pub(x, fx[0])
	pub(a, framesOfRows(s, a, 4, 1)...)
	pub(x, fx[1])
	pub(a, s.EncodeBye(a, 1, 4))
	pub(b, framesOfRows(s, b, 2, 1)...)
	waitFor(t, 5*time.Second, "B's frame", func() bool {
		st, ok := actorOf(in, b)
		return ok && st.NextFrame == 1
	})
	st := in.Stats()
	want := IngesterStats{Frames: 2, Steps: 4*4 + 2*4, Bytes: st.Bytes, Dead: 2, Held: 1, Joins: 2, Leaves: 1}
	if st != want {
		t.Fatalf("stats %+v, want %+v", st, want)
	}
	if got := in.State().StreamFloor; got != 5 {
		t.Fatalf("stream floor %d, want 5", got)
	}
	ctx := testCtx(t)
	ds, err := js.Stream(ctx, DefaultDeadStream)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, "2 dead letters", func() bool {
		info, err := ds.Info(ctx)
		return err == nil && info.State.Msgs == 2
	})
	const reason = "remote: observer for actor 000000000000000c: no observer for 3 rows"
	for seq := uint64(1); seq <= 2; seq++ {
		m, err := ds.GetMsg(ctx, seq)
		if err != nil {
			t.Fatal(err)
		}
		if got := m.Header.Get("Trajring-Reason"); got != reason {
			t.Fatalf("dead letter %d: reason %q, want %q", seq, got, reason)
		}
	}
	if got := strings.Count(logs.String(), "actor=000000000000000c"); got != 1 {
		t.Fatalf("actor X logged %d times, want 1:\n%s", got, logs.String())
	}
}
