//go:build trajring_cuda

package dqn

import (
	"errors"
	"fmt"
	"math"

	"github.com/trajring/trajring/gpu"
	"gorgonia.org/tensor"
)

// batchKey identifies the device tensors of a DeviceBatch: a captured
// step reads the addresses it was captured with.
type batchKey struct {
	obs, next, act, rew, disc, w, valid uintptr
	validBool                           bool
}

func keyOf(b DeviceBatch) batchKey {
	p := func(t *tensor.Dense) uintptr {
		if t == nil {
			return 0
		}
		return t.Uintptr()
	}
	return batchKey{obs: p(b.Obs), next: p(b.NextObs), act: p(b.Actions), rew: p(b.Reward), disc: p(b.Discount),
		w: p(b.Weights), valid: p(b.Valid), validBool: b.Valid != nil && b.Valid.Dtype() == tensor.Bool}
}

// UseGraph switches TrainStep between launching a step's kernels one by
// one (off, the default) and replaying them as a CUDA graph (on): the
// first step on a batch's device tensors captures the step
// (gpu.Backend.CaptureGraph) and every step on the same tensors (a
// trainer's reused sample) launches the graph, one driver call instead
// of 2L+1 launches. Adam's learning rate and step count then live in
// device memory (gpu.AdamDevice's hyper block), updated by the graph's
// Adam launch itself and by a stream-ordered upload when the host's
// differ (a new learning rate, LoadState, steps taken off the graph), so
// both paths write the same bytes, step for step
// (TestDeviceLearnerGraphIsDirect). A batch on other tensors captures a
// new graph. Turning it off keeps the graph for a later switch back. A
// capture the driver refuses three times in a row turns it off
// (GraphError says why).
func (l *DeviceLearner) UseGraph(on bool) { l.useGraph = on }

// GraphLaunches returns the steps TrainStep has replayed from a graph.
func (l *DeviceLearner) GraphLaunches() int64 { return l.graphLaunches }

// maxCaptureFails is how many failed captures in a row turn the graph
// off (see stepGraph).
const maxCaptureFails = 3

// captureStep captures a step: gpu.Backend.CaptureGraph, replaced by
// tests that refuse captures.
var captureStep = (*gpu.Backend).CaptureGraph

// GraphError returns the last capture the driver refused (the step was
// then launched directly, the same bytes; after maxCaptureFails refusals
// in a row every step is), or nil.
func (l *DeviceLearner) GraphError() error { return l.graphErr }

// GraphCaptures returns how many times the step has been captured (once
// per new set of batch tensors).
func (l *DeviceLearner) GraphCaptures() int64 { return l.captures }

// stepGraph queues one gradient step as a graph launch, capturing it
// first for a batch on new tensors.
func (l *DeviceLearner) stepGraph(b DeviceBatch) error {
	if l.hyper == nil {
		if err := l.allocHyper(); err != nil {
			return err
		}
	}
	key := keyOf(b)
	if l.graph == nil || key != l.graphKey {
		if l.graph != nil {
			if err := l.graph.Close(); err != nil {
				return err
			}
			l.graph = nil
		}
		l.capturing = true
		g, err := captureStep(l.be, func() error { return l.step(b) })
		l.capturing = false
		if err != nil {
			if errors.Is(err, gpu.ErrDeviceLost) || errors.Is(err, gpu.ErrClosed) {
				return err
			}
			// Nothing of the step ran: launch it directly. A capture can
			// also fail for a reason of the moment (another goroutine, such
			// as a cleanup freeing device memory, waited on the stream
			// meanwhile), so the next steps try again; a driver that
			// refuses maxCaptureFails times in a row cannot capture the
			// step, which is then launched directly from now on.
			l.graphErr = err
			if l.captureFails++; l.captureFails >= maxCaptureFails {
				l.useGraph = false
			}
			return l.step(b)
		}
		l.graph, l.graphKey, l.captureFails = g, key, 0
		l.captures++
	}
	if err := l.syncHyper(); err != nil {
		return err
	}
	if err := l.graph.Launch(); err != nil {
		l.devT = -1 // whether the step ran is not known
		return err
	}
	l.adamT++
	l.devT = l.adamT
	l.graphLaunches++
	return nil
}

// allocHyper allocates and fills Adam's hyper block with the learner's
// learning rate and step count.
func (l *DeviceLearner) allocHyper() error {
	words := gpu.AdamHyperWords()
	a, err := l.arena(8 * int64(words))
	if err != nil {
		return err
	}
	h, err := l.be.Tensor(a, 0, tensor.Uint64, words)
	if err != nil {
		return fmt.Errorf("dqn: device learner: %w", err)
	}
	if err := l.be.Upload(a, 0, gpu.AdamHyper(l.lr, l.adamT)); err != nil {
		return fmt.Errorf("dqn: device learner: %w", err)
	}
	l.hyper, l.hyperArena, l.devT, l.devLR = h, a, l.adamT, l.lr
	return nil
}

// syncHyper queues uploads of the step count and learning rate into the
// hyper block where the device's differ from the host's (in stream
// order: after the launches before, before the next).
func (l *DeviceLearner) syncHyper() error {
	if l.devT != l.adamT {
		off, b := gpu.AdamHyperStep(l.adamT)
		if err := l.be.Upload(l.hyperArena, off, b); err != nil {
			return fmt.Errorf("dqn: device learner: %w", err)
		}
		l.devT = l.adamT
	}
	if math.Float32bits(float32(l.devLR)) != math.Float32bits(float32(l.lr)) || math.IsNaN(l.devLR) {
		off, b := gpu.AdamHyperRate(l.lr)
		if err := l.be.Upload(l.hyperArena, off, b); err != nil {
			return fmt.Errorf("dqn: device learner: %w", err)
		}
		l.devLR = l.lr
	}
	return nil
}
