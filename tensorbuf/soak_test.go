package tensorbuf_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/trajring/trajring/tensorbuf"
)

// soakDuration is how long TestSoakConcurrent runs before it closes the
// buffer under its goroutines: a second in `make test`, longer with
// TRAJRING_SOAK=2m (any time.ParseDuration value).
func soakDuration(t *testing.T) time.Duration {
	if s := os.Getenv("TRAJRING_SOAK"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil {
			t.Fatalf("TRAJRING_SOAK=%q: %v", s, err)
		}
		return d
	}
	return time.Second
}

// TestSoakConcurrent runs a collector (adds and inserts into a
// rate-limited prioritized table and a FIFO table with MaxTimesSampled),
// three learners, a priority updater, an exporter and a direct sampler at
// once, then closes the buffer while they run. Every result must hold the
// steps it names (no torn or stale data: every stored value is a function
// of its row and step), and every goroutine must end with ErrClosed, never
// another error, a hang or a panic.
func TestSoakConcurrent(t *testing.T) {
	const envs, capacity = 4, 64
	b, err := tensorbuf.New(tensorbuf.Config{NumEnvs: envs, Capacity: capacity, Fields: testFields, Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	prio, err := b.NewTable(tensorbuf.TableConfig{Name: "prio", Selector: tensorbuf.Prioritized, Beta: 0.4, Seed: 1,
		RateLimiter: &tensorbuf.RateLimiter{MinSize: 8, SamplesPerInsert: 4, ErrorBuffer: 64}})
	if err != nil {
		t.Fatal(err)
	}
	fifo, err := b.NewTable(tensorbuf.TableConfig{Name: "fifo", Selector: tensorbuf.FIFO, MaxTimesSampled: 2, MaxSize: 100,
		RateLimiter: &tensorbuf.RateLimiter{MinSize: 1}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		failures []error
		results  atomic.Int64
	)
	fail := func(err error) {
		mu.Lock()
		failures = append(failures, err)
		mu.Unlock()
	}
	// done records how a goroutine ended: only ErrClosed is allowed.
	done := func(who string, err error) {
		if !errors.Is(err, tensorbuf.ErrClosed) {
			fail(errors.Join(errors.New(who+" ended without ErrClosed"), err))
		}
	}
	run := func(who string, f func() error) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			done(who, f())
		}()
	}

	run("collector", func() error {
		w, err := b.NewWriter()
		if err != nil {
			return err
		}
		rng := rand.New(rand.NewPCG(1, 2))
		eps := &episodes{rng: rng, next: make([]tensorbuf.StepType, envs)}
		rows := []int{0, 1, 2, 3}
		for pos := int64(0); ; pos++ {
			meta := make([]rawStep, envs)
			for r := range envs {
				meta[r] = eps.step(r)
			}
			if err := w.Add(makeStep(t, rows, []int64{pos, pos, pos, pos}, meta)); err != nil {
				return err
			}
			if pos < 4 {
				continue
			}
			r := rng.IntN(envs)
			it := tensorbuf.Item{Row: r, Start: pos - 3, Len: 4, Priority: 1 + rng.Float64()}
			for _, tb := range []*tensorbuf.Table{prio, fifo} {
				// The ring may have moved on while the inserter waited: ErrItem is an
				// honest answer then.
				if _, err := tb.InsertContext(ctx, it); err != nil && !errors.Is(err, tensorbuf.ErrItem) {
					return err
				}
			}
		}
	})
	keys := make(chan []uint64, 16)
	for i := range 3 {
		tb := prio
		if i == 2 {
			tb = fifo
		}
		run("learner", func() error {
			bt := new(tensorbuf.Batch)
			defer bt.Release()
			for {
				if err := tb.SampleInto(ctx, bt, 8); err != nil {
					return err
				}
				if err := checkSoakBatch(bt); err != nil {
					fail(err)
					return nil
				}
				results.Add(1)
				select {
				case keys <- append([]uint64(nil), bt.Keys...):
				default:
				}
			}
		})
	}
	stopUpdates := make(chan struct{})
	run("priority updater", func() error {
		rng := rand.New(rand.NewPCG(5, 6))
		for {
			select {
			case ks := <-keys:
				ps := make([]float64, len(ks))
				for i := range ps {
					ps[i] = rng.Float64() * 2
				}
				// Items may have left the table (evicted by the ring) since they were
				// sampled: ErrUnknownKey is an honest answer.
				if err := prio.UpdatePriorities(ks, ps); err != nil && !errors.Is(err, tensorbuf.ErrUnknownKey) {
					return err
				}
			case <-stopUpdates:
				return tensorbuf.ErrClosed // metadata calls keep working after Close
			}
		}
	})
	run("exporter", func() error {
		for {
			exp, err := b.AllExperiences(tensorbuf.ExportBatch)
			if errors.Is(err, tensorbuf.ErrEmpty) {
				continue
			}
			if err != nil {
				return err
			}
			err = checkSoakTransitions(exp[0])
			_ = exp[0].Release()
			if err != nil {
				fail(err)
				return nil
			}
			results.Add(1)
		}
	})
	run("direct sampler", func() error {
		bt := new(tensorbuf.Batch)
		defer bt.Release()
		for {
			err := b.SampleSequencesInto(bt, 4, 3, tensorbuf.SequenceOptions{EpisodeAware: true})
			if errors.Is(err, tensorbuf.ErrEmpty) {
				continue
			}
			if err != nil {
				return err
			}
			if err := checkSoakBatch(bt); err != nil {
				fail(err)
				return nil
			}
			results.Add(1)
		}
	})

	time.Sleep(soakDuration(t))
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	close(stopUpdates)
	ended := make(chan struct{})
	go func() { wg.Wait(); close(ended) }()
	select {
	case <-ended:
	case <-time.After(10 * time.Second):
		t.Fatal("goroutines still running 10 s after Close")
	}
	for _, err := range failures {
		t.Error(err)
	}
	if results.Load() == 0 {
		t.Fatal("no goroutine produced a result before Close")
	}
	t.Logf("%d results checked", results.Load())
}

// checkSoakBatch checks that every real step of a batch holds the values
// written for its row and step, and every pad step zeros.
func checkSoakBatch(bt *tensorbuf.Batch) error {
	hb, err := bt.Host()
	if err != nil {
		return err
	}
	defer hb.Release()
	_, l := hb.Len()
	obs := hb.Fields["obs"].Data().([]float32)
	for i, it := range hb.Items {
		if it.Len+it.Pad > l {
			return errors.New("item longer than the batch")
		}
		for k := range l {
			for e := range 3 {
				want := float32(0)
				if k < it.Len {
					want = float32(val(0, it.Row, it.Start+int64(k), e))
				}
				if got := obs[(i*l+k)*3+e]; got != want {
					return errors.New("batch holds a value its item did not write")
				}
			}
		}
	}
	return nil
}

// checkSoakTransitions checks the observations of exported transitions.
func checkSoakTransitions(tr *tensorbuf.Transitions) error {
	h, err := tr.Host()
	if err != nil {
		return err
	}
	defer h.Release()
	obs := h.Observation["obs"].Data().([]float32)
	next := h.NextObservation["obs"].Data().([]float32)
	for i, r := range h.Rows {
		for e := range 3 {
			if obs[i*3+e] != float32(val(0, r, h.Steps[i], e)) || next[i*3+e] != float32(val(0, r, h.Steps[i]+1, e)) {
				return errors.New("export holds a value its transition did not write")
			}
		}
	}
	return nil
}
