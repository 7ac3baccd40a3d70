package remote

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/trajring/trajring/observer"
	"github.com/trajring/trajring/tensorbuf"
)

// runIngester starts an ingester in the background until stop (or the
// test's end); the returned stop waits for it. Only the consumer's
// creation is bounded in time: Run must not end on its own while a long
// test (the soak, the cluster scenarios) still publishes.
func runIngester(t testing.TB, cfg IngesterConfig) (*Ingester, func()) {
	t.Helper()
	cctx, ccancel := context.WithTimeout(context.Background(), 30*time.Second)
	in, err := NewIngester(cctx, cfg)
	ccancel()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = in.Run(ctx); close(done) }()
	var stopped bool
	stop := func() {
		if !stopped {
			stopped = true
			cancel()
			select {
			case <-done:
			case <-time.After(30 * time.Second):
				t.Errorf("Ingester.Run did not return within 30 s of its context's end: %+v", in.Stats())
			}
		}
	}
	t.Cleanup(stop)
	return in, stop
}

// publishSteps has a new publisher publish n batched steps of g, flushes,
// and returns it (not closed).
func publishSteps(t testing.TB, js jetstream.JetStream, b *tensorbuf.Buffer, g *gen, n int, k int, compress bool) *Publisher {
	t.Helper()
	p, err := NewPublisher(PublisherConfig{JetStream: js, Fields: b.Fields(), StepsPerFrame: k, Compress: compress, Context: testCtx(t)})
	if err != nil {
		t.Fatal(err)
	}
	for range n {
		if err := p.Observe(g.next()); err != nil {
			t.Fatal(err)
		}
	}
	if err := p.Flush(); err != nil {
		t.Fatal(err)
	}
	return p
}

// testCtx bounds a test's publisher waits (Observe, Flush, Close), so a
// stream that never answers fails the test instead of hanging it.
func testCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func sum(v []int64) (s int64) {
	for _, x := range v {
		s += x
	}
	return s
}

// episodeFactory stores every step and makes one item per episode.
func episodeFactory(buf *tensorbuf.Buffer, rows []int) (RowObserver, error) {
	g, err := observer.NewShared(buf, observer.SharedConfig{Rows: rows})
	if err != nil {
		return nil, err
	}
	if _, err := g.NewAddEpisode(observer.AddEpisodeConfig{Tables: []string{"episodes"}, MaxSequenceLength: 64}); err != nil {
		_ = g.Close()
		return nil, err
	}
	return g, nil
}

func newEpisodeBuffer(t testing.TB, rows, capacity int) *tensorbuf.Buffer {
	b := newTestBuffer(t, rows, capacity)
	if _, err := b.NewTable(tensorbuf.TableConfig{Name: "episodes", Selector: tensorbuf.Uniform, MaxSize: 1 << 20}); err != nil {
		t.Fatal(err)
	}
	return b
}

func TestIngestExactCounts(t *testing.T) {
	t.Parallel()
	srv := startServer(t, t.TempDir(), -1)
	defer srv.Shutdown()
	_, js := connect(t, srv.ClientURL())
	ensure(t, js, StreamConfig{Memory: true})
	buf := newEpisodeBuffer(t, 8, 256)
	in, _ := runIngester(t, IngesterConfig{JetStream: js, Buffer: buf, NewObserver: episodeFactory})
	tests := []struct {
		name     string
		rows, k  int
		steps    int
		compress bool
	}{
		{"plain", 3, 8, 50, false},
		{"s2 partial last frame", 4, 16, 37, true},
	}
	var total, leaves int64
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := publishSteps(t, js, buf, newGen(tc.rows), tc.steps, tc.k, tc.compress)
			if got := sum(p.Published()); got != int64(tc.rows*tc.steps) {
				t.Fatalf("published %d, want %d", got, tc.rows*tc.steps)
			}
			total += int64(tc.rows * tc.steps)
			if err := p.Close(); err != nil {
				t.Fatal(err)
			}
			leaves++
			waitFor(t, 10*time.Second, "steps ingested", func() bool { return in.Stats().Steps == total && in.Stats().Leaves == leaves })
		})
	}
	// Each actor's rows hold exactly what it published; they were freed
	// by its bye and reused by the next actor, whose rows start with First
	// after the first actor's mid-episode end: cuts, no item across.
	st := in.Stats()
	if st.Duplicates != 0 || st.Dead != 0 || st.Gaps != 0 {
		t.Fatalf("stats %+v", st)
	}
	if got := buf.Stats().Steps; got != total {
		t.Fatalf("buffer holds %d steps, published %d", got, total)
	}
	// Items exactly as a local AddEpisode: every complete episode (row r
	// has episodes of 4+r steps with the boundary), none of a partial one.
	want := 0
	for _, tc := range tests {
		for r := range tc.rows {
			want += tc.steps / (4 + r)
		}
	}
	tb, _ := buf.Table("episodes")
	if got := tb.Size(); got != want {
		t.Fatalf("episode items %d, want %d", got, want)
	}
}
