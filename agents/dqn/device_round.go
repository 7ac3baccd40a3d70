//go:build trajring_cuda

package dqn

import (
	"errors"
	"fmt"

	"github.com/trajring/trajring/gpu"
	"github.com/trajring/trajring/tensorbuf"
)

// A RoundGraph is a whole training round (a DeviceSelection table's
// transition samples, the gradient steps on them and the priority
// updates after them) captured as one CUDA graph by RecordRound and
// replayed by ReplayRound: one graph launch a round where the direct
// calls make about ten launches a gradient step. The per-step scalars
// live in device memory: Adam's rate, step count and c1/c2 in the
// learner's hyper block (advanced by the graph's Adam launches), the
// sampler's Philox call, the live count, beta and the update epoch in the
// table's round block (tensorbuf.Round), so a replay writes the bytes
// the same calls made one by one would (TestRoundGraphIsDirect). It
// belongs to one learner and one table; Close frees it.
type RoundGraph struct {
	l     *DeviceLearner
	g     *gpu.Graph
	round *tensorbuf.Round
	steps int64 // the round's gradient steps
}

// captureRound captures a round: gpu.Backend.CaptureGraph, replaced by
// tests that refuse captures.
var captureRound = (*gpu.Backend).CaptureGraph

// RecordRound captures record, which makes one training round's calls in
// their order (table.SampleTransitionsInto, TrainStep, and for a
// prioritized table table.UpdatePrioritiesDevice, each as often as the
// round needs) on table, a DeviceSelection table of this learner's
// backend, as one graph, and runs it once for this round (ReplayRound):
// the round's work runs once, as the direct calls would have run it.
// Every memory the calls use must already exist (make the first round
// directly): a call that would allocate or copy to the device fails the
// capture. A capture that fails (record's error, the driver's refusal, a
// table that changed meanwhile) runs nothing and counts nothing: the
// table's and the learner's counters are as before the call, and the
// caller makes the round directly. TrainStep replays no graph of its own
// while a round records. Nothing else may use the learner, table's
// buffer or the backend meanwhile (other goroutines' backend calls fail
// with gpu.ErrCapturing). A table on another backend fails with
// ErrConfig.
func (l *DeviceLearner) RecordRound(table *tensorbuf.Table, record func() error) (*RoundGraph, error) {
	if table == nil || table.Buffer().Backend() != tensorbuf.Backend(l.be) {
		return nil, fmt.Errorf("%w: a round's table must be on the learner's backend", ErrConfig)
	}
	if l.hyper == nil {
		if err := l.allocHyper(); err != nil {
			return nil, err
		}
	}
	if err := l.syncHyper(); err != nil {
		return nil, err
	}
	if err := table.BeginRound(); err != nil {
		return nil, err
	}
	steps0 := l.steps
	l.capturing = true
	g, err := captureRound(l.be, record)
	l.capturing = false
	round, eerr := table.EndRound(err == nil)
	if err == nil && eerr != nil {
		_ = g.Close()
		err = eerr
	}
	steps := l.steps - steps0
	l.steps = steps0 // a capture runs nothing: ReplayRound counts
	if err != nil {
		return nil, fmt.Errorf("dqn: recording a round: %w", err)
	}
	rg := &RoundGraph{l: l, g: g, round: round, steps: steps}
	l.records++
	if l.roundGraphs == nil {
		l.roundGraphs = map[*RoundGraph]struct{}{}
	}
	l.roundGraphs[rg] = struct{}{}
	ok, err := l.ReplayRound(rg)
	if err == nil && !ok {
		err = fmt.Errorf("%w: a round just recorded could not be replayed", ErrConfig)
	}
	if err != nil {
		_ = rg.Close()
		return nil, err
	}
	return rg, nil
}

// ReplayRound replays a recorded round: the learner's hyper block brought
// up to date (queued), then, under the table's locks, its round block and
// the graph's launch (tensorbuf.Round.Replay), and the learner's and the
// table's counters advanced by the round. ok is false, with nothing
// launched or counted, when the round cannot be replayed now (the table's
// memory moved, or it cannot serve the round's samples without waiting):
// the caller makes the round directly, or records it again. It is not
// safe for concurrent use with other calls on the learner.
func (l *DeviceLearner) ReplayRound(rg *RoundGraph) (ok bool, err error) {
	if rg == nil || rg.l != l || rg.g == nil || l.mem == nil {
		return false, fmt.Errorf("%w: a round recorded by another learner, closed, or of a closed learner", ErrConfig)
	}
	if err := l.syncHyper(); err != nil {
		return false, err
	}
	launched := false
	ok, err = rg.round.Replay(func() error {
		launched = true
		return rg.launch()
	})
	if err != nil && launched {
		l.devT = -1 // whether the round ran is not known
	}
	return ok, err
}

// launch queues the round's graph and counts its steps.
func (rg *RoundGraph) launch() error {
	l := rg.l
	if err := rg.g.Launch(); err != nil {
		l.devT = -1
		return err
	}
	l.adamT += rg.steps
	l.steps += rg.steps
	l.devT = l.adamT
	l.graphLaunches++
	l.rounds++
	return nil
}

// RoundRecords returns the rounds recorded (RecordRound calls that
// succeeded).
func (l *DeviceLearner) RoundRecords() int64 { return l.records }

// Steps returns the gradient steps of the round.
func (rg *RoundGraph) Steps() int64 { return rg.steps }

// Close destroys the round's graph (the learner's Close closes its
// rounds too); Close is idempotent.
func (rg *RoundGraph) Close() error {
	if rg == nil || rg.g == nil {
		return nil
	}
	err := rg.g.Close()
	rg.g = nil
	delete(rg.l.roundGraphs, rg)
	if errors.Is(err, gpu.ErrClosed) {
		return nil // the backend's Close destroyed it
	}
	return err
}

// RoundLaunches returns the rounds replayed (or run once when recorded)
// from a RoundGraph.
func (l *DeviceLearner) RoundLaunches() int64 { return l.rounds }
