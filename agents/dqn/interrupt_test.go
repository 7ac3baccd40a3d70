package dqn

import (
	"context"
	"math"
	"sync"
	"testing"

	"github.com/trajring/trajring/driver"
)

// closeAfter is an observer that closes ch once it has seen n collected
// steps: an interrupt in the middle of a round's collection.
type closeAfter struct {
	n    int
	ch   chan struct{}
	once sync.Once
}

func (c *closeAfter) Observe(*driver.Trajectory) error {
	if c.n--; c.n == 0 {
		c.once.Do(func() { close(c.ch) })
	}
	return nil
}

// TestInterruptEndsRunAsStop: closing TrainConfig.Interrupt, between two
// rounds (from Progress) or in the middle of a round's collection (from
// an observer), ends the run with Interrupted set and no error: the steps
// collected are counted, the last network is returned, a checkpoint of
// that state is the newest (Checkpointed), the final evaluations are not
// run (NaN), and a resume continues from it to Steps.
func TestInterruptEndsRunAsStop(t *testing.T) {
	for _, mid := range []bool{false, true} {
		dir := t.TempDir()
		cfg := smallRun(dir, 1500, 1000)
		ch := make(chan struct{})
		cfg.Interrupt = ch
		if mid {
			cfg.Observers = []driver.Observer{&closeAfter{n: 650, ch: ch}}
		} else {
			var once sync.Once
			cfg.Progress = func(p Progress) {
				if p.EnvSteps >= 500 {
					once.Do(func() { close(ch) })
				}
			}
		}
		res, err := RunCartPole(context.Background(), cfg)
		if err != nil {
			t.Fatalf("mid %v: %v", mid, err)
		}
		steps := res.Last.EnvSteps
		if !res.Interrupted || !res.Checkpointed || res.Network == nil || !math.IsNaN(res.EvalReturn) || !math.IsNaN(res.LastEvalReturn) {
			t.Fatalf("mid %v: interrupted %v, checkpointed %v, network %v, returns %v %v", mid, res.Interrupted, res.Checkpointed,
				res.Network != nil, res.EvalReturn, res.LastEvalReturn)
		}
		if mid && (steps <= 600 || steps >= 700) || !mid && steps != 500 { // mid: within the round from 600 to 700
			t.Fatalf("mid %v: stopped at %d env steps", mid, steps)
		}
		ck, err := ReadCheckpoint(dir)
		if err != nil || ck.Progress.EnvSteps != steps || ck.Generation != 1 {
			t.Fatalf("mid %v: newest checkpoint %+v, %v; want generation 1 at %d env steps", mid, ck, err, steps)
		}
		if n := len(ck.History); n == 0 || ck.History[n-1].EnvSteps != steps {
			t.Fatalf("mid %v: the history ends at %+v, want %d env steps", mid, ck.History[len(ck.History)-1], steps)
		}
		cfg.Interrupt, cfg.Observers, cfg.Progress, cfg.Resume = nil, nil, nil, true
		res, err = RunCartPole(context.Background(), cfg)
		if err != nil || res.Interrupted || res.Last.EnvSteps != 1500 || math.IsNaN(res.EvalReturn) {
			t.Fatalf("mid %v: resume: %v, interrupted %v, env steps %d, return %v", mid, err, res.Interrupted, res.Last.EnvSteps, res.EvalReturn)
		}
	}
	// Without checkpoints an interrupted run still returns its networks.
	cfg := smallRun("", 1500, 0)
	ch := make(chan struct{})
	close(ch)
	cfg.Interrupt = ch
	res, err := RunCartPole(context.Background(), cfg)
	if err != nil || !res.Interrupted || res.Checkpointed || res.Network == nil || res.Last.EnvSteps != 0 {
		t.Fatalf("interrupted at once: %v, %+v", err, res)
	}
}
