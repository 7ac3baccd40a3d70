package remote

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/trajring/trajring/observer"
	"github.com/trajring/trajring/tensorbuf"
)

// benchShape is one step layout of the throughput benchmark.
type benchShape struct {
	name  string
	width int   // observation floats
	steps int64 // row steps per cell, all actors together
	cap   int   // buffer capacity per row
}

// benchShapes: a low-dim step (a 4-float observation, an int64 action:
// 40 B with the built-in columns) and a 3 KB step (768 floats).
var benchShapes = []benchShape{
	{"low-dim", 4, 2 << 20, 4096},
	{"3 KB", 768, 96 << 10, 1024},
}

// benchResult is one row of the table.
type benchResult struct {
	shape             string
	actors            int
	stepBytes         float64 // frame bytes per row step
	remote, raw, proc float64 // steps/s
}

// TestIngestThroughput (TRAJRING_REMOTE_BENCH=1, or a comma list of cells
// such as "low-dim/1,3 KB/4") measures, for 1, 2 and 4 actor goroutines
// (each with its own connection) and low-dim and 3 KB steps: the steps/s
// and MB/s the Ingester writes into a buffer from a file-backed stream;
// a raw JetStream publish/consume of the same number of frames of the
// same bytes, in the same run (the engine's own ceiling: async publishes,
// one pull consumer, every message acknowledged); and in-process
// collection (the actors writing through observer.Shared directly). It
// prints a table with the ratios. Every wait has a deadline.
func TestIngestThroughput(t *testing.T) {
	runBenchCells(t, "TRAJRING_REMOTE_BENCH", "actor goroutines", benchCell)
}

// runBenchCells runs cell for every shape and 1, 2 and 4 actors that
// the environment variable env selects ("1": all; else a comma list of
// cells such as "low-dim/2"; unset: the test is skipped) and prints the
// table, with actors naming the actors column.
func runBenchCells(t *testing.T, env, actors string, cell func(*testing.T, benchShape, int) benchResult) {
	sel := os.Getenv(env)
	if sel == "" {
		t.Skip("set " + env + "=1")
	}
	var res []benchResult
	for _, sh := range benchShapes {
		for _, n := range []int{1, 2, 4} {
			name := fmt.Sprintf("%s/%d", sh.name, n)
			if sel != "1" && !slices.Contains(strings.Split(sel, ","), name) {
				continue
			}
			res = append(res, cell(t, sh, n))
		}
	}
	fmt.Println(benchTable(res, actors))
}

// benchTable formats results as a Markdown table; actors names the
// actors column.
func benchTable(res []benchResult, actors string) string {
	var b strings.Builder
	b.WriteString("| step | " + actors + " | remote steps/s | remote MB/s | raw JetStream steps/s | raw MB/s | remote/raw | in-process steps/s | remote/in-process |\n")
	b.WriteString("|---|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, r := range res {
		fmt.Fprintf(&b, "| %s | %d | %.0f | %.0f | %.0f | %.0f | %.2f | %.0f | %.2f |\n",
			r.shape, r.actors, r.remote, r.remote*r.stepBytes/1e6, r.raw, r.raw*r.stepBytes/1e6,
			r.remote/r.raw, r.proc, r.remote/r.proc)
	}
	return b.String()
}

const (
	benchRows = 8  // rows per actor
	benchK    = 32 // steps per frame
)

func benchFields(width int) []tensorbuf.Field {
	return []tensorbuf.Field{
		{Name: "obs", Role: tensorbuf.Observation, DType: tensorbuf.Float32, Shape: []int{width}},
		{Name: "action", Role: tensorbuf.Action, DType: tensorbuf.Int64, Shape: []int{}},
	}
}

// benchCell runs the three measurements of one cell on a fresh server.
func benchCell(t *testing.T, sh benchShape, actors int) benchResult {
	dir, err := os.MkdirTemp("", "trajring-bench-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	srv := startServer(t, dir, -1)
	defer srv.Shutdown()
	_, js := connect(t, srv.ClientURL())
	ensure(t, js, StreamConfig{MaxBytes: 8 << 30})
	fields := benchFields(sh.width)
	// Whole frames only, so that the raw run sends exactly the same bytes.
	perActor := sh.steps / int64(actors) / (benchRows * benchK) * benchK // batched steps per actor
	total := perActor * benchRows * int64(actors)
	frames := int(total / (benchRows * benchK))
	r := benchResult{shape: sh.name, actors: actors}

	// Remote: actors -> JetStream (file) -> Ingester -> buffer.
	buf, err := tensorbuf.New(tensorbuf.Config{NumEnvs: benchRows * actors, Capacity: sh.cap, Fields: fields})
	if err != nil {
		t.Fatal(err)
	}
	defer buf.Close()
	in, stop := runIngester(t, IngesterConfig{JetStream: js, Buffer: buf})
	var bytes atomic.Int64
	var frame []byte // one real frame, for the raw run
	var frameOnce sync.Once
	start := time.Now()
	var wg sync.WaitGroup
	for range actors {
		wg.Go(func() {
			_, ajs := connect(t, srv.ClientURL())
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			p, err := NewPublisher(PublisherConfig{JetStream: ajs, Fields: fields, StepsPerFrame: benchK, MaxInFlight: 256, Context: ctx})
			if err != nil {
				t.Error(err)
				return
			}
			g := newGenWidth(benchRows, sh.width)
			for range perActor {
				if err := p.Observe(g.next()); err != nil {
					t.Error(err)
					return
				}
			}
			if err := p.Flush(); err != nil {
				t.Error(err)
			}
			bytes.Add(p.Stats().Bytes)
			frameOnce.Do(func() {
				frame, _ = p.schema.encode(nil, nil, false, p.actor, 0, benchRows, []int{0, 1, 2, 3, 4, 5, 6, 7}, make([]int64, benchRows), benchK, fullCols(p.schema, benchRows, benchK))
			})
		})
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	waitFor(t, 60*time.Second, fmt.Sprintf("%s, %d actors: %d steps ingested (stats %+v)", sh.name, actors, total, in.Stats()),
		func() bool { return in.Stats().Steps >= total })
	r.remote = float64(total) / time.Since(start).Seconds()
	stop()
	if st := in.Stats(); st.Steps != total || st.Duplicates != 0 || st.Dead != 0 {
		t.Fatalf("ingested %+v, want %d steps, no duplicates, nothing dead", st, total)
	}
	r.stepBytes = float64(bytes.Load()) / float64(total)
	if len(frame) != int(bytes.Load())/frames {
		t.Fatalf("frames of %d bytes, published %d bytes in %d frames", len(frame), bytes.Load(), frames)
	}

	// Raw JetStream: the same frames, no trajring code.
	r.raw = float64(total) / rawJetStream(t, srv.ClientURL(), actors, frames, frame).Seconds()

	// In-process: the same trajectories through observer.Shared.
	buf2, err := tensorbuf.New(tensorbuf.Config{NumEnvs: benchRows * actors, Capacity: sh.cap, Fields: fields})
	if err != nil {
		t.Fatal(err)
	}
	defer buf2.Close()
	start = time.Now()
	for a := range actors {
		wg.Go(func() {
			rows := make([]int, benchRows)
			for i := range rows {
				rows[i] = a*benchRows + i
			}
			o, err := observer.NewShared(buf2, observer.SharedConfig{Rows: rows})
			if err != nil {
				t.Error(err)
				return
			}
			defer o.Close()
			g := newGenWidth(benchRows, sh.width)
			for range perActor {
				if err := o.Observe(g.next()); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	r.proc = float64(total) / time.Since(start).Seconds()
	if got := buf2.Stats().Steps; got != total {
		t.Fatalf("in-process wrote %d steps, want %d", got, total)
	}
	t.Logf("%s, %d actors: remote %.0f steps/s, raw %.0f, in-process %.0f", sh.name, actors, r.remote, r.raw, r.proc)
	return r
}

// fullCols returns k steps of r rows of zero column data.
func fullCols(s *Schema, r, k int) [][]byte {
	cols := make([][]byte, len(s.colBytes))
	for c, cb := range s.colBytes {
		cols[c] = make([]byte, cb*r*k)
	}
	return cols
}

// rawJetStream publishes frames copies of frame from actors goroutines,
// each on its own connection (async, at most 256 in flight, each with a
// message id, and at most defaultMaxInFlightBytes, as the Publisher does), to a file-backed stream, and
// consumes them with a durable pull consumer acknowledging each one as
// the Ingester does. It returns the time until all are consumed.
func rawJetStream(t *testing.T, url string, actors, frames int, frame []byte) time.Duration {
	t.Helper()
	_, js := connect(t, url)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if _, err := js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{Name: "RAW", Subjects: []string{"raw.>"}, Storage: jetstream.FileStorage, Duplicates: 2 * time.Minute}); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = js.DeleteStream(context.Background(), "RAW") }()
	cons, err := js.CreateOrUpdateConsumer(ctx, "RAW", jetstream.ConsumerConfig{Durable: "raw", AckPolicy: jetstream.AckExplicitPolicy, MaxAckPending: 1024})
	if err != nil {
		t.Fatal(err)
	}
	it, err := cons.Messages(jetstream.PullMaxBytes(32 << 20)) // as the Ingester
	if err != nil {
		t.Fatal(err)
	}
	stopIt := context.AfterFunc(ctx, it.Stop) // the deadline ends Next
	defer stopIt()
	var got atomic.Int64
	done := make(chan struct{})
	start := time.Now()
	go func() {
		defer close(done)
		for got.Load() < int64(frames) {
			m, err := it.Next()
			if err != nil {
				return
			}
			_ = m.Ack()
			got.Add(1)
		}
	}()
	var wg sync.WaitGroup
	per := frames / actors
	for a := range actors {
		n := per
		if a == actors-1 {
			n = frames - per*(actors-1)
		}
		wg.Go(func() {
			_, ajs := connect(t, url)
			var queue []jetstream.PubAckFuture
			wait := func() bool {
				select {
				case <-queue[0].Ok():
				case err := <-queue[0].Err():
					t.Error(err)
					return false
				case <-ctx.Done():
					return false
				}
				queue = queue[1:]
				return true
			}
			for i := range n {
				for len(queue) >= 256 || (len(queue) > 0 && (len(queue)+1)*len(frame) > defaultMaxInFlightBytes) {
					if !wait() {
						return
					}
				}
				f, err := ajs.PublishAsync(fmt.Sprintf("raw.%d", a), frame, jetstream.WithMsgID(fmt.Sprintf("%d-%d", a, i)))
				if err != nil {
					t.Error(err)
					return
				}
				queue = append(queue, f)
			}
			for len(queue) > 0 {
				if !wait() {
					return
				}
			}
		})
	}
	wg.Wait()
	<-done // ends by the count or the deadline
	it.Stop()
	if n := got.Load(); n != int64(frames) {
		t.Fatalf("raw JetStream: consumed %d of %d messages before the deadline", n, frames)
	}
	return time.Since(start)
}
