package remote

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/trajring/trajring/tensorbuf"
)

// TestIngestThroughput (TRAJRING_REMOTE_BENCH=1) measures ingest steps/s
// and MB/s with 1, 2 and 4 actor goroutines, low-dim and 3 KB steps, next
// to a raw JetStream publish/consume (ack each) of the same frames in the
// same run, and prints the ratio.
func TestIngestThroughput(t *testing.T) {
	if os.Getenv("TRAJRING_REMOTE_BENCH") == "" {
		t.Skip("set TRAJRING_REMOTE_BENCH=1")
	}
	for _, obsLen := range []int{4, 768} { // 16 B and 3 KB observations
		for _, actors := range []int{1, 2, 4} {
			rows, k, batches := 8, 32, 4000/actors
			if obsLen > 4 {
				batches = 400 / actors
			}
			fields := []tensorbuf.Field{{Name: "obs", Role: tensorbuf.Observation, DType: tensorbuf.Float32, Shape: []int{obsLen}},
				{Name: "action", Role: tensorbuf.Action, DType: tensorbuf.Int64, Shape: []int{}}}
			srv := startServer(t, t.TempDir(), -1)
			_, js := connect(t, srv.ClientURL())
			ensure(t, js, StreamConfig{MaxBytes: 8 << 30})
			buf, err := tensorbuf.New(tensorbuf.Config{NumEnvs: rows * actors, Capacity: 4096, Fields: fields})
			if err != nil {
				t.Fatal(err)
			}
			in, stop := runIngester(t, IngesterConfig{JetStream: js, Buffer: buf})
			want := int64(actors * rows * batches)
			start := time.Now()
			var wg sync.WaitGroup
			var bytes int64
			var mu sync.Mutex
			for range actors {
				wg.Go(func() {
					g := newGenFields(rows, obsLen)
					p, _ := NewPublisher(PublisherConfig{JetStream: js, Fields: fields, StepsPerFrame: k, MaxInFlight: 256})
					for range batches {
						_ = p.Observe(g.traj())
					}
					_ = p.Flush()
					mu.Lock()
					bytes += p.Stats().Bytes
					mu.Unlock()
				})
			}
			wg.Wait()
			waitFor(t, 120*time.Second, "ingest", func() bool { return in.Stats().Steps >= want })
			remoteDur := time.Since(start)
			stop()
			_ = buf.Close()
			// Raw JetStream: the same number of frames of the same size.
			frames := int(want) / (rows * k)
			size := int(bytes) / frames
			rawDur := rawJetStream(t, js, actors, frames, size)
			srv.Shutdown()
			stepBytes := float64(bytes) / float64(want)
			fmt.Printf("obs %4d B  actors %d: remote %8.0f steps/s %7.1f MB/s | raw JetStream %8.0f steps/s %7.1f MB/s | ratio %.2f\n",
				obsLen*4, actors, float64(want)/remoteDur.Seconds(), float64(bytes)/remoteDur.Seconds()/1e6,
				float64(want)/rawDur.Seconds(), float64(want)*stepBytes/rawDur.Seconds()/1e6, rawDur.Seconds()/remoteDur.Seconds())
		}
	}
}

// rawJetStream publishes frames messages of size bytes from actors
// goroutines (async, bounded) and consumes them with a durable pull
// consumer acking each; it returns the time until all are consumed.
func rawJetStream(t *testing.T, js jetstream.JetStream, actors, frames, size int) time.Duration {
	ctx := context.Background()
	if _, err := js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{Name: "RAW", Subjects: []string{"raw.>"}, Storage: jetstream.FileStorage}); err != nil {
		t.Fatal(err)
	}
	cons, err := js.CreateOrUpdateConsumer(ctx, "RAW", jetstream.ConsumerConfig{Durable: "raw", AckPolicy: jetstream.AckExplicitPolicy, MaxAckPending: 1024})
	if err != nil {
		t.Fatal(err)
	}
	data := make([]byte, size)
	start := time.Now()
	got := make(chan struct{})
	go func() {
		it, _ := cons.Messages(jetstream.PullMaxMessages(256))
		for n := 0; n < frames; n++ {
			m, err := it.Next()
			if err != nil {
				break
			}
			_ = m.Ack()
		}
		it.Stop()
		close(got)
	}()
	var wg sync.WaitGroup
	for a := range actors {
		wg.Go(func() {
			for i := range frames / actors {
				if _, err := js.PublishAsync(fmt.Sprintf("raw.%d", a), data, jetstream.WithMsgID(fmt.Sprintf("%d-%d", a, i))); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	<-got
	return time.Since(start)
}

type genFields struct {
	g   *gen
	obs int
}

func newGenFields(rows, obsLen int) *genFields {
	g := newGen(rows)
	if obsLen != 4 {
		g.traj.Observation["obs"] = tensorNew(rows, obsLen)
	}
	return &genFields{g: g, obs: obsLen}
}

func (g *genFields) traj() *trajT {
	if g.obs == 4 {
		return g.g.next()
	}
	// Keep step types consistent; the big observation stays as it is.
	obs := g.g.traj.Observation["obs"]
	g.g.traj.Observation["obs"] = tensorNew(g.g.b, 4)
	t := g.g.next()
	t.Observation["obs"] = obs
	return t
}
