package remote

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestCloseAfterCancel: an actor stopped by cancelling its Publisher's
// Context (trajring actor on Ctrl-C) still flushes every sealed frame and
// says goodbye on Close, so the learner writes all of its steps and frees
// its rows for the next actor. Before Close had a context of its own, its
// flush failed with context.Canceled and the rows stayed taken for good.
func TestCloseAfterCancel(t *testing.T) {
	t.Parallel()
	srv := startServer(t, t.TempDir(), -1)
	defer srv.Shutdown()
	_, js := connect(t, srv.ClientURL())
	ensure(t, js, StreamConfig{Memory: true})
	buf := newTestBuffer(t, 4, 256)
	in, _ := runIngester(t, IngesterConfig{JetStream: js, Buffer: buf})

	ctx, cancel := context.WithCancel(testCtx(t))
	// MaxInFlight 1: an Observe waits for acknowledgements, so the cancel
	// may come while a sealed frame waits for room.
	p, err := NewPublisher(PublisherConfig{JetStream: js, Fields: buf.Fields(), StepsPerFrame: 2, MaxInFlight: 1, Context: ctx})
	if err != nil {
		t.Fatal(err)
	}
	g := newGen(4)
	for range 9 { // four whole frames and a partial one
		if err := p.Observe(g.next()); err != nil {
			t.Fatal(err)
		}
	}
	cancel()
	// A frame sealed while the context is done is queued, not lost.
	if err := p.Observe(g.next()); err != nil && !errors.Is(err, context.Canceled) {
		t.Fatalf("Observe after cancel: %v", err)
	}
	if err := p.Flush(); !errors.Is(err, context.Canceled) && err != nil {
		t.Fatalf("Flush after cancel: %v", err)
	}
	if err := p.Close(); err != nil {
		t.Fatalf("Close after the context was cancelled: %v", err)
	}
	want := sum(p.Published())
	if want != 4*10 {
		t.Fatalf("published %d steps, want 40", want)
	}
	waitFor(t, 10*time.Second, "the actor's steps and bye", func() bool {
		st := in.Stats()
		return st.Steps == want && st.Leaves == 1
	})
	// Its rows are free: a second actor of all four rows is written.
	q := publishSteps(t, js, buf, newGen(4), 8, 4, false)
	if err := q.Close(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "the second actor's steps and bye", func() bool {
		st := in.Stats()
		return st.Steps == want+32 && st.Leaves == 2 // the bye is ingested after the last frame
	})
	if st := in.Stats(); st.Joins != 2 || st.Leaves != 2 || st.Dead != 0 {
		t.Fatalf("stats %+v", st)
	}
}

// TestCloseTimeout: Close gives up after CloseTimeout when the stream
// never answers, with an error naming the actor, and may be tried again.
func TestCloseTimeout(t *testing.T) {
	t.Parallel()
	srv := startServer(t, t.TempDir(), -1)
	_, js := connect(t, srv.ClientURL())
	ensure(t, js, StreamConfig{Memory: true})
	buf := newTestBuffer(t, 2, 64)
	p, err := NewPublisher(PublisherConfig{JetStream: js, Fields: buf.Fields(), StepsPerFrame: 4, CloseTimeout: 300 * time.Millisecond, Context: testCtx(t)})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Observe(newGen(2).next()); err != nil {
		t.Fatal(err)
	}
	srv.Shutdown()
	start := time.Now()
	err = p.Close()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Close with the server gone: %v, want a deadline error", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("Close took %v with a CloseTimeout of 300 ms", d)
	}
	if err := p.Close(); err == nil {
		t.Fatal("a second Close with the server gone succeeded")
	}
}

// syncBuffer is a bytes.Buffer safe for concurrent use (a test's log).
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestVanishedActorVisible: an actor that stops without a bye (killed)
// keeps its rows; a later actor that needs them waits, and the wait is
// visible: Occupancy counts it and a warning is logged once. With
// ActorIdle the vanished actor's rows are freed and the later actor's
// steps are written. (Before, nothing said why a later actor's steps never
// came.)
func TestVanishedActorVisible(t *testing.T) {
	t.Parallel()
	for _, idle := range []time.Duration{0, 500 * time.Millisecond} {
		t.Run(fmt.Sprintf("idle %v", idle), func(t *testing.T) {
			t.Parallel()
			srv := startServer(t, t.TempDir(), -1)
			defer srv.Shutdown()
			_, js := connect(t, srv.ClientURL())
			ensure(t, js, StreamConfig{Memory: true})
			buf := newTestBuffer(t, 2, 256)
			var log syncBuffer
			in, _ := runIngester(t, IngesterConfig{JetStream: js, Buffer: buf, ActorIdle: idle,
				Logger: slog.New(slog.NewTextHandler(&log, nil))})
			publishSteps(t, js, buf, newGen(2), 8, 4, false) // the vanished actor: never closed, no bye
			waitFor(t, 10*time.Second, "the first actor's steps", func() bool { return in.Stats().Steps == 16 })
			later := publishSteps(t, js, buf, newGen(2), 8, 4, false)
			if idle == 0 {
				waitFor(t, 10*time.Second, "the later actor counted as waiting", func() bool {
					a, w := in.Occupancy()
					return a == 1 && w == 1
				})
				if got := log.String(); strings.Count(got, "actor waits for free rows") != 1 || !strings.Contains(got, fmt.Sprintf("%016x", later.Actor())) {
					t.Errorf("log %q: want one warning naming the waiting actor", got)
				}
				if st := in.Stats(); st.Steps != 16 {
					t.Errorf("%d steps written while the later actor waits, want 16", st.Steps)
				}
				return
			}
			waitFor(t, 15*time.Second, "the later actor's steps", func() bool { return in.Stats().Steps == 32 })
			// The later actor holds its rows, or, idle for ActorIdle itself
			// by now on a loaded machine, has been freed too; none waits.
			if a, w := in.Occupancy(); a > 1 || w != 0 {
				t.Errorf("occupancy %d actors, %d waiting; want at most 1, 0", a, w)
			}
		})
	}
}
