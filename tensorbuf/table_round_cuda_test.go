//go:build trajring_cuda

package tensorbuf_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/trajring/trajring/gpu"
	"github.com/trajring/trajring/tensorbuf"
)

// roundRig is a DeviceSelection table on the gpu backend with a writer
// and the transitions a round samples into, for the round tests.
type roundRig struct {
	t     *testing.T
	g     *gpu.Backend
	buf   *tensorbuf.Buffer
	w     *tensorbuf.Writer
	tbl   *tensorbuf.Table
	tr    *tensorbuf.TableTransitions
	sel   tensorbuf.Selector
	step  int
	items int
}

const (
	roundRows  = 4
	roundSteps = 5  // sample-and-update calls a round
	roundN     = 16 // transitions a sample
)

var roundOpt = tensorbuf.NStepOptions{Horizon: 3, DiscountFactor: 0.75}

func newRoundRig(t *testing.T, sel tensorbuf.Selector) *roundRig {
	t.Helper()
	return newRoundRigLimited(t, sel, nil)
}

// newRoundRigLimited is newRoundRig with a rate limiter on the table.
func newRoundRigLimited(t *testing.T, sel tensorbuf.Selector, rl *tensorbuf.RateLimiter) *roundRig {
	t.Helper()
	g, err := gpu.New()
	if err != nil {
		t.Fatal(err)
	}
	r := &roundRig{t: t, g: g, sel: sel, tr: new(tensorbuf.TableTransitions)}
	fields := hostTimeFields["low-dim"]
	if r.buf, err = tensorbuf.New(tensorbuf.Config{NumEnvs: roundRows, Capacity: 48, Fields: fields, Seed: 7, Backend: g}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = r.tr.Release()
		_ = r.buf.Close()
		_ = g.Close()
	})
	if r.w, err = r.buf.NewWriter(); err != nil {
		t.Fatal(err)
	}
	if r.tbl, err = r.buf.NewTable(tensorbuf.TableConfig{Name: "replay", Selector: sel, Seed: 11, Beta: 0.6, DeviceSelection: true,
		MaxSize: 200, RateLimiter: rl}); err != nil {
		t.Fatal(err)
	}
	return r
}

// collect writes k steps to every row, episodes of 9 steps ending in
// terminations and truncations, and inserts an item of two to four steps
// ending at each (the table's size grows past its mirror's 64 and 128
// slots, then evicts).
func (r *roundRig) collect(k int) {
	fields := hostTimeFields["low-dim"]
	for range k {
		s := fullStep(fields, roundRows)
		for row := range roundRows {
			switch pos := r.step + 2*row; pos % 9 {
			case 0:
				s.StepType[row] = tensorbuf.First
			case 7:
				s.NextStepType[row] = tensorbuf.Last
				if row%2 == 0 {
					s.Discount[row] = 0
				}
			case 8:
				s.StepType[row], s.NextStepType[row] = tensorbuf.Last, tensorbuf.First
			}
			s.Reward[row] = float32(100*row+r.step) / 8
		}
		obs := s.Values["obs"].Data().([]float32)
		for i := range obs {
			obs[i] = float32(r.step*1000 + i)
		}
		if err := r.w.Add(s); err != nil {
			r.t.Fatal(err)
		}
		r.step++
		for row := range roundRows {
			// Items of two to four steps (a transition needs two), ending
			// at the newest step.
			l := 2 + (row+r.step)%3
			if r.step < l {
				continue
			}
			if _, err := r.tbl.Insert(tensorbuf.Item{Row: row, Start: int64(r.step - l), Len: l, Priority: float64(1 + (row+r.step)%4)}); err != nil {
				r.t.Fatal(err)
			}
		}
	}
}

// call is one step of a round: a sample, and for a prioritized table a
// device priority update from the sample's masked weights.
func (r *roundRig) call() error {
	if err := r.tbl.SampleTransitionsInto(context.Background(), r.tr, roundN, roundOpt); err != nil {
		return err
	}
	if r.sel == tensorbuf.Prioritized {
		return r.tbl.UpdatePrioritiesDevice(r.tr.KeyTensor, r.tr.MaskedWeightTensor)
	}
	return nil
}

func (r *roundRig) direct() {
	for range roundSteps {
		if err := r.call(); err != nil {
			r.t.Fatal(err)
		}
	}
}

// record records a round as a graph and runs it once (Replay).
func (r *roundRig) record() (*tensorbuf.Round, *gpu.Graph) {
	if err := r.tbl.BeginRound(); err != nil {
		r.t.Fatal(err)
	}
	g, err := r.g.CaptureGraph(func() error {
		for range roundSteps {
			if err := r.call(); err != nil {
				return err
			}
		}
		return nil
	})
	round, eerr := r.tbl.EndRound(err == nil)
	if err != nil || eerr != nil {
		r.t.Fatalf("recording a round: %v, %v", err, eerr)
	}
	if ok, err := round.Replay(g.Launch); !ok || err != nil {
		r.t.Fatalf("the first replay of a round just recorded: %v, %v", ok, err)
	}
	return round, g
}

// dump is the last sample of a round (its device tensors copied to the
// host) and the table's counters.
func (r *roundRig) dump() string {
	if err := r.tr.HostMeta(); err != nil {
		r.t.Fatal(err)
	}
	st := tensorbuf.TableCounters(r.tbl)
	return fmt.Sprintf("keys %v\nprobs %v\nweights %v\nvalid %v rows %v steps %v size %d\ncounters %s\n%s",
		r.tr.Keys, r.tr.Probabilities, r.tr.Weights, r.tr.Valid, r.tr.Rows, r.tr.Steps, r.tr.TableSize, st,
		hostTransitions(r.t, &r.tr.Transitions))
}

// TestRoundReplayIsDirect: rounds of samples (n-step transitions) and,
// for a prioritized table, device priority updates, recorded once as a
// CUDA graph and replayed round after round with new steps and items
// between rounds, draw the same items and write the same bytes as the
// same calls made one by one on a twin: each round's last sample (keys,
// probabilities, weights, validity, tensors) and the table's counters
// are equal, and so is a sample made directly after the last round
// (which reads the Philox calls and the tree the rounds left). Rounds
// whose mirror moved (the table outgrew it) are reported stale and
// recorded again after one direct round.
func TestRoundReplayIsDirect(t *testing.T) {
	for _, sel := range []tensorbuf.Selector{tensorbuf.Uniform, tensorbuf.Prioritized} {
		t.Run(sel.String(), func(t *testing.T) {
			d, rr := newRoundRig(t, sel), newRoundRig(t, sel)
			var round *tensorbuf.Round
			var graph *gpu.Graph
			replays, records, stale, valid := 0, 0, 0, 0
			warm := false
			for i := range 14 {
				d.collect(3)
				rr.collect(3)
				// A new beta each round (the round block carries it).
				for _, r := range []*roundRig{d, rr} {
					if err := r.tbl.SetBeta(0.4 + 0.04*float64(i)); err != nil {
						t.Fatal(err)
					}
				}
				d.direct()
				replayed := false
				if graph != nil {
					ok, err := round.Replay(graph.Launch)
					if err != nil {
						t.Fatal(err)
					}
					if replayed = ok; ok {
						replays++
					} else {
						stale++
						_ = graph.Close()
						graph, warm = nil, false
					}
				}
				switch {
				case replayed:
				case warm:
					round, graph = rr.record()
					records++
				default:
					rr.direct()
					warm = true
				}
				if got, want := rr.dump(), d.dump(); got != want {
					t.Fatalf("round %d (replayed %v): recorded rounds sampled\n%s\ndirect calls sampled\n%s", i, replayed, got, want)
				}
				for _, v := range rr.tr.Valid {
					if v {
						valid++
					}
				}
			}
			if graph != nil {
				_ = graph.Close()
			}
			for _, r := range []*roundRig{d, rr} {
				if err := r.call(); err != nil {
					t.Fatal(err)
				}
			}
			if got, want := rr.dump(), d.dump(); got != want {
				t.Fatalf("after the rounds: sampled\n%s\ndirect twin sampled\n%s", got, want)
			}
			if valid < 14*roundN/2 {
				t.Errorf("%d valid transitions in the rounds' last samples of %d: the rounds must sample real transitions", valid, 14*roundN)
			}
			if replays < 6 || records < 2 || stale < 1 {
				t.Errorf("%d replays, %d recordings, %d stale rounds: want the rounds mostly replayed, and the mirror's moves seen", replays, records, stale)
			}
			t.Logf("%d rounds replayed, %d recorded, %d found stale", replays, records, stale)
		})
	}
}

// TestRoundRefusals: what a recording refuses (a second BeginRound, a
// device SampleInto, a sample after an insert, EndRound without a
// recording, Replay while recording, a round on a host-selecting table)
// fails with ErrInvalidArg, and EndRound(false) puts the table's calls
// and samples back (not its update epoch): the next sample draws what a
// twin that never recorded draws. A replay whose transitions moved is
// refused and counts nothing; while recording, UpdatePrioritiesDeviceAfter
// with events is refused and another goroutine's sample fails with
// gpu.ErrCapturing. Replay after Close fails with ErrClosed.
func TestRoundRefusals(t *testing.T) {
	r, twin := newRoundRig(t, tensorbuf.Prioritized), newRoundRig(t, tensorbuf.Prioritized)
	for _, x := range []*roundRig{r, twin} {
		x.collect(4)
		x.direct()
	}
	round, graph := r.record()
	defer graph.Close()
	twin.direct()
	if _, err := r.tbl.EndRound(true); !errors.Is(err, tensorbuf.ErrInvalidArg) {
		t.Errorf("EndRound without a recording: %v, want ErrInvalidArg", err)
	}
	if err := r.tbl.BeginRound(); err != nil {
		t.Fatal(err)
	}
	if err := r.tbl.BeginRound(); !errors.Is(err, tensorbuf.ErrInvalidArg) {
		t.Errorf("second BeginRound: %v, want ErrInvalidArg", err)
	}
	if _, err := round.Replay(graph.Launch); !errors.Is(err, tensorbuf.ErrInvalidArg) {
		t.Errorf("Replay while recording: %v, want ErrInvalidArg", err)
	}
	bt := new(tensorbuf.Batch)
	defer bt.Release()
	if err := r.tbl.SampleInto(context.Background(), bt, 4); !errors.Is(err, tensorbuf.ErrInvalidArg) {
		t.Errorf("SampleInto while recording: %v, want ErrInvalidArg", err)
	}
	// Calls recorded (not captured: on the stand-in they run), then an
	// insert, after which a recorded sample is refused.
	if err := r.call(); err != nil {
		t.Fatal(err)
	}
	r.collect(1)
	if err := r.call(); !errors.Is(err, tensorbuf.ErrInvalidArg) || !strings.Contains(err.Error(), "changed while a round records") {
		t.Errorf("sample after an insert while recording: %v, want ErrInvalidArg", err)
	}
	e0 := tensorbuf.TableEpoch(r.tbl)
	if got, err := r.tbl.EndRound(false); got != nil || err != nil {
		t.Fatalf("EndRound(false): %v, %v", got, err)
	}
	if e := tensorbuf.TableEpoch(r.tbl); e != e0 {
		t.Errorf("EndRound(false) moved the update epoch from %d to %d; epochs only grow", e0, e)
	}
	twin.collect(1)
	if err := twin.call(); err != nil {
		t.Fatal(err)
	}
	// The recorded call above ran (it was not captured) and updated
	// priorities the twin did not, so compare the counters only: the
	// next draws use the same Philox call.
	if err := r.call(); err != nil {
		t.Fatal(err)
	}
	if a, b := tensorbuf.TableCounters(r.tbl), tensorbuf.TableCounters(twin.tbl); a != b {
		t.Errorf("after EndRound(false): table %s, twin %s", a, b)
	}

	// A replay whose recorded transitions moved (sampled outside the round
	// into more transitions: new memory) is refused, nothing counted.
	r2 := newRoundRig(t, tensorbuf.Uniform)
	r2.collect(4)
	r2.direct()
	round2, graph2 := r2.record()
	defer graph2.Close()
	if err := r2.tbl.SampleTransitionsInto(context.Background(), r2.tr, 4*roundN, roundOpt); err != nil {
		t.Fatal(err)
	}
	before := tensorbuf.TableCounters(r2.tbl)
	if ok, err := round2.Replay(graph2.Launch); ok || err != nil {
		t.Errorf("replay after its transitions moved: %v, %v; want false, nil", ok, err)
	}
	if after := tensorbuf.TableCounters(r2.tbl); after != before {
		t.Errorf("a refused replay counted: %s, then %s", before, after)
	}

	// While a round records, UpdatePrioritiesDeviceAfter's events are
	// refused, and another goroutine's calls on the backend fail
	// (gpu.ErrCapturing) instead of being captured.
	r3 := newRoundRig(t, tensorbuf.Prioritized)
	r3.collect(4)
	r3.direct()
	ev, err := r3.g.NewEvent()
	if err != nil {
		t.Fatal(err)
	}
	defer ev.Close()
	if err := r3.tbl.BeginRound(); err != nil {
		t.Fatal(err)
	}
	var otherErr, afterErr error
	g3, err := r3.g.CaptureGraph(func() error {
		if err := r3.call(); err != nil {
			return err
		}
		afterErr = r3.tbl.UpdatePrioritiesDeviceAfter(r3.tr.KeyTensor, r3.tr.MaskedWeightTensor, 0, ev)
		done := make(chan struct{})
		go func() {
			defer close(done)
			tr := new(tensorbuf.TableTransitions)
			defer tr.Release()
			otherErr = r3.tbl.SampleTransitionsInto(context.Background(), tr, roundN, roundOpt)
		}()
		<-done
		return nil
	})
	round3, err2 := r3.tbl.EndRound(err == nil)
	if err != nil || err2 != nil {
		t.Fatalf("recording: %v, %v", err, err2)
	}
	defer g3.Close()
	if !errors.Is(afterErr, tensorbuf.ErrInvalidArg) {
		t.Errorf("UpdatePrioritiesDeviceAfter with an event while recording: %v, want ErrInvalidArg", afterErr)
	}
	if !errors.Is(otherErr, gpu.ErrCapturing) {
		t.Errorf("another goroutine's sample during the capture: %v, want gpu.ErrCapturing", otherErr)
	}
	if round3.Calls() != 1 || round3.Updates() != 1 || round3.Samples() != roundN {
		t.Errorf("round recorded %d calls, %d updates, %d samples; want 1, 1, %d", round3.Calls(), round3.Updates(), round3.Samples(), roundN)
	}

	host := newRoundRig(t, tensorbuf.Uniform)
	h2, err := host.buf.NewTable(tensorbuf.TableConfig{Name: "host", Selector: tensorbuf.Uniform})
	if err != nil {
		t.Fatal(err)
	}
	if err := h2.BeginRound(); !errors.Is(err, tensorbuf.ErrInvalidArg) {
		t.Errorf("BeginRound on a host-selecting table: %v, want ErrInvalidArg", err)
	}
	if err := r.buf.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := round.Replay(graph.Launch); !errors.Is(err, tensorbuf.ErrClosed) {
		t.Errorf("Replay after Close: %v, want ErrClosed", err)
	}
}

// TestRoundReplayWaitsForTheRateLimiter: a replay the table's rate
// limiter cannot serve whole is refused (false, nothing launched or
// counted) rather than waiting, and the same round replays once inserts
// allow it, drawing what a twin's direct calls draw.
func TestRoundReplayWaitsForTheRateLimiter(t *testing.T) {
	// A sample an insert with an error buffer of 190 from 1 item: a
	// sample of n is allowed while samples+n <= inserts+189 (and an insert
	// while inserts-samples <= 191). The first 11 steps insert 36 items:
	// 225 samples, a direct round (80) and a recorded one (80), not a
	// third; 5 more steps insert 20 more (the tree keeps its 64 leaves,
	// so the round stays valid).
	rl := &tensorbuf.RateLimiter{MinSize: 1, SamplesPerInsert: 1, ErrorBuffer: 190}
	d, r := newRoundRigLimited(t, tensorbuf.Prioritized, rl), newRoundRigLimited(t, tensorbuf.Prioritized, rl)
	for _, x := range []*roundRig{d, r} {
		x.collect(11)
		x.direct()
	}
	d.direct()
	round, graph := r.record()
	defer graph.Close()
	before := tensorbuf.TableCounters(r.tbl)
	if ok, err := round.Replay(graph.Launch); ok || err != nil {
		t.Fatalf("a replay past the rate limiter: %v, %v; want false, nil", ok, err)
	}
	if after := tensorbuf.TableCounters(r.tbl); after != before {
		t.Fatalf("a refused replay counted: %s, then %s", before, after)
	}
	d.collect(5)
	r.collect(5)
	d.direct()
	if ok, err := round.Replay(graph.Launch); !ok || err != nil {
		t.Fatalf("the replay once inserts allow it: %v, %v", ok, err)
	}
	if got, want := r.dump(), d.dump(); got != want {
		t.Fatalf("replayed round sampled\n%s\ndirect twin sampled\n%s", got, want)
	}
}
