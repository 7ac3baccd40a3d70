//go:build trajring_cuda

package dqn

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"

	"github.com/trajring/trajring/driver"
	"github.com/trajring/trajring/gpu"
	"github.com/trajring/trajring/internal/rawbytes"
	"github.com/trajring/trajring/kernels"
	"github.com/trajring/trajring/tensorbuf"
	"gorgonia.org/tensor"
)

// gpuBuild reports whether this build has DeviceLearner.
const gpuBuild = true

// deviceTrainGraph is whether a trainer's device learner replays its
// gradient step from a CUDA graph (DeviceLearner.UseGraph): on unless
// the environment sets TRAJRING_DQN_GRAPH=0, which launches the step's
// kernels one by one (the same bytes; for comparisons on a GPU).
var deviceTrainGraph = os.Getenv("TRAJRING_DQN_GRAPH") != "0"

// deviceTrainRound is whether a trainer's device learner replays each
// whole training round from one CUDA graph (RecordRound, learnRound): on
// unless the environment sets TRAJRING_DQN_ROUND=0 (or
// TRAJRING_DQN_GRAPH=0), which makes each round's calls one by one (the
// same bytes).
var deviceTrainRound = os.Getenv("TRAJRING_DQN_ROUND") != "0"

// onDeviceTrainClose, when set (tests), sees the learner before close
// frees it.
var onDeviceTrainClose func(*deviceTrainLearner)

// deviceTrainLearner is DeviceLearner as a trainer's learner, on a gpu
// backend of its own that the replay buffer shares. Its table selects on
// the device (DeviceSelection): a step's transitions, validity mask,
// importance weights and keys are the sample's device tensors, read in
// place, and the new priorities go back with UpdatePrioritiesDevice, all
// in the backend's stream order, so nothing is copied to the host and
// nothing waits. A table selected on the host (one restored from a
// checkpoint written without DeviceSelection) still works: the mask and
// weights go up, and the new priorities come back for
// UpdatePriorities32. Its gradient step is replayed from a CUDA graph
// (DeviceLearner.UseGraph; deviceTrainGraph): the sample's tensors are
// reused from step to step, so the step is captured once and each
// gradient step is one graph launch besides the sampling's and the
// priority update's launches. A whole round (every sample, step and
// priority update of it) is replayed from one graph besides
// (learnRound).
type deviceTrainLearner struct {
	*DeviceLearner
	be          *gpu.Backend
	prioritized bool
	meta        kernels.Arena // valid at 0, w at wOff
	wOff        int64
	valid, w    *tensor.Dense // uint8 [B], float64 [B] in meta
	validHost   []byte
	prio        []float32
	batch       DeviceBatch
	// stale reports that the online network changed since the policy's
	// host copy of it (QFunc) was taken: a gradient step or LoadState.
	stale bool
	// paramsPinned and validPinned (pinned memory) receive roundEnd's
	// copies of the online parameters and of the last sample's validity
	// mask; pinnedAt is Steps when paramsPinned was last filled (-1:
	// not since the last LoadState).
	paramsPinned, validPinned []byte
	pinnedAt                  int64
	// The round graph (learnRound): on, the recorded round (nil: none),
	// whether a round was made directly on the current table (the memory
	// a recording needs then exists), the failed recordings in a row and
	// the last one's error.
	roundOn    bool
	round      *RoundGraph
	warm       bool
	roundFails int
	roundErr   error
}

// newDeviceTrainLearner starts a gpu backend (an error wrapping
// gpu.ErrNoDevice when there is no usable GPU) and a DeviceLearner on it.
func newDeviceTrainLearner(cfg Config, prioritized bool) (_ learner, _ tensorbuf.Backend, err error) {
	be, err := gpu.New()
	if err != nil {
		return nil, nil, err
	}
	d := &deviceTrainLearner{be: be, prioritized: prioritized, validHost: make([]byte, cfg.BatchSize), prio: make([]float32, cfg.BatchSize),
		stale: true, pinnedAt: -1}
	defer func() {
		if err != nil {
			_ = d.close()
		}
	}()
	if d.DeviceLearner, err = NewDeviceLearner(cfg, be); err != nil {
		return nil, nil, err
	}
	d.UseGraph(deviceTrainGraph)
	d.roundOn = deviceTrainGraph && deviceTrainRound
	B := int64(cfg.BatchSize)
	d.wOff = (B + 255) &^ 255
	if d.meta, err = be.Alloc(d.wOff + 8*B); err != nil {
		return nil, nil, fmt.Errorf("dqn: device learner: %w", err)
	}
	if d.valid, err = be.Tensor(d.meta, 0, tensor.Uint8, cfg.BatchSize); err != nil {
		return nil, nil, err
	}
	if d.w, err = be.Tensor(d.meta, d.wOff, tensor.Float64, cfg.BatchSize); err != nil {
		return nil, nil, err
	}
	return d, be, nil
}

func (d *deviceTrainLearner) updateTarget() error        { return d.UpdateTarget() }
func (d *deviceTrainLearner) network() (*Network, error) { return d.Network() }
func (d *deviceTrainLearner) bytesToHost() int64         { return d.be.BytesToHost() }
func (d *deviceTrainLearner) counts() backendCounts {
	return backendCounts{launches: d.be.Launches(), syncs: d.be.Syncs(), copies: d.be.CopiesToHost(), graphs: d.GraphLaunches()}
}
func (d *deviceTrainLearner) agent() *Agent         { return nil }
func (d *deviceTrainLearner) deviceSelection() bool { return true }

// QFunc is the training policy's Q-function: the host copy of the
// online network (Network.QFunc over observation field name), refreshed
// at the first env step after the network changed from the copy
// roundEnd made with the round's one wait (else, before the first round
// or after LoadState, with one copy of the weights and one wait), so
// acting makes no round trip per env step: a trainer collects a round's env steps, then
// takes its gradient steps, and the policy acts on the network as it was
// after the last gradient step, as on the cpu backend. The Q-values are
// the host forward pass's, which may differ from the device's in the
// last bits (the device learner's equality tests bound the difference).
func (d *deviceTrainLearner) QFunc(name string) driver.QFunc {
	var q driver.QFunc
	return func(obs map[string]*tensor.Dense, out []float32) error {
		if d.stale || q == nil {
			var n *Network
			if d.pinnedAt == d.Steps() {
				// roundEnd's copy, already waited for: no device call.
				flat := make([]float32, d.nparam)
				for i := range flat {
					flat[i] = math.Float32frombits(binary.LittleEndian.Uint32(d.paramsPinned[4*i:]))
				}
				n = d.networkFrom(flat)
			} else {
				var err error
				if n, err = d.Network(); err != nil {
					return err
				}
			}
			d.stale, q = false, n.QFunc(name)
		}
		return q(obs, out)
	}
}

// LoadState is DeviceLearner.LoadState; the policy's host copy of the
// network is refreshed at its next env step.
func (d *deviceTrainLearner) LoadState(r io.Reader) error {
	d.stale, d.pinnedAt = true, -1
	return d.DeviceLearner.LoadState(r)
}

// evalQFunc plays evaluations on a host copy of the network: one copy of
// the weights instead of the Q-values of every evaluation step.
func (d *deviceTrainLearner) evalQFunc(obs string) (driver.QFunc, error) {
	n, err := d.Network()
	if err != nil {
		return nil, err
	}
	return n.QFunc(obs), nil
}

// load takes the transitions' device tensors and their validity mask
// and (prioritized) importance weights: a device-selected sample's
// tensors, or the host-selected sample's values uploaded.
func (d *deviceTrainLearner) load(tr *tensorbuf.TableTransitions, obs, act string) error {
	if tr.KeyTensor != nil {
		var w *tensor.Dense
		if d.prioritized {
			w = tr.WeightTensor
		}
		var err error
		d.batch, err = d.BatchFromTransitions(&tr.Transitions, obs, act, w, tr.ValidTensor)
		return err
	}
	if len(tr.Valid) != len(d.validHost) || len(tr.Weights) != len(d.validHost) {
		return fmt.Errorf("%w: %d transitions for a batch of %d", ErrConfig, len(tr.Valid), len(d.validHost))
	}
	for i, v := range tr.Valid {
		d.validHost[i] = 0
		if v {
			d.validHost[i] = 1
		}
	}
	if err := d.be.Upload(d.meta, 0, d.validHost); err != nil {
		return fmt.Errorf("dqn: device learner: %w", err)
	}
	var w *tensor.Dense
	if d.prioritized {
		if err := d.be.Upload(d.meta, d.wOff, rawbytes.Of(tr.Weights)); err != nil {
			return fmt.Errorf("dqn: device learner: %w", err)
		}
		w = d.w
	}
	var err error
	d.batch, err = d.BatchFromTransitions(&tr.Transitions, obs, act, w, d.valid)
	return err
}

// learnRound makes a round of steps gradient steps, each step's calls
// made by step, as one graph launch when it can (see roundLearner): it
// replays the round recorded before, or records one (again when the
// table's memory moved: Replay made the mirrors anew) once a round of
// steps has been made directly on the table (so that every memory the
// calls use exists), and reports done false when the caller must make
// the round directly: the first round on a table, a recording that
// failed (three in a row turn the rounds off; roundErr says why).
func (d *deviceTrainLearner) learnRound(table *tensorbuf.Table, steps int, step func() error) (done bool, err error) {
	if !d.roundOn || steps <= 0 || table == nil {
		return false, nil
	}
	if d.round != nil && (d.round.Steps() != int64(steps) || d.round.round.Table() != table) {
		d.dropRound()
		d.warm = false
	}
	if d.round != nil {
		ok, err := d.ReplayRound(d.round)
		if ok {
			d.stale = true // as train would have set it
		}
		if err != nil || ok {
			return ok, err
		}
		if !table.CanSample(int(d.round.round.Samples())) {
			return false, nil // the rate limiter: keep the round, make this one directly
		}
		d.dropRound() // its memory moved: record it again below
	}
	if !d.warm {
		d.warm = true
		return false, nil
	}
	rg, err := d.RecordRound(table, func() error {
		for range steps {
			if err := step(); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		if errors.Is(err, gpu.ErrDeviceLost) || errors.Is(err, gpu.ErrClosed) || errors.Is(err, tensorbuf.ErrClosed) {
			return false, err
		}
		d.roundErr = err
		if d.roundFails++; d.roundFails >= maxCaptureFails {
			d.roundOn = false
		}
		return false, nil
	}
	d.round, d.roundFails = rg, 0
	return true, nil
}

// dropRound destroys the recorded round.
func (d *deviceTrainLearner) dropRound() {
	if d.round != nil {
		_ = d.round.Close()
		d.round = nil
	}
}

func (d *deviceTrainLearner) train() (float64, error) {
	d.stale = true
	return 0, d.TrainStep(d.batch)
}

// updatePriorities queues the step's priorities into the table with
// UpdatePrioritiesDevice for a device-selected sample (the update runs
// after the step and before the next sample in stream order); for a
// host-selected one it copies them to the host, waiting for the step (4
// bytes a transition), for UpdatePriorities32.
func (d *deviceTrainLearner) updatePriorities(table *tensorbuf.Table, tr *tensorbuf.TableTransitions) error {
	if tr.KeyTensor != nil {
		return table.UpdatePrioritiesDevice(tr.KeyTensor, d.Priorities())
	}
	if err := d.download(d.prio, d.Priorities()); err != nil {
		return err
	}
	return table.UpdatePriorities32(tr.Keys, d.prio)
}

// roundEnd waits for the round once: it queues copies of the online
// network (for the policy: QFunc) and of the last sample's validity mask
// into pinned memory, then copies the last step's loss back (a metric:
// the round's loss on the device is its last step's), which waits for
// all of it and reports the round's errors.
func (d *deviceTrainLearner) roundEnd(_ float64, steps int, tr *tensorbuf.TableTransitions) (float64, int, int, error) {
	if steps == 0 {
		if err := d.be.Sync(); err != nil {
			return 0, 0, 0, fmt.Errorf("dqn: device learner: %w", err)
		}
		return 0, 0, 0, nil
	}
	if err := d.pin(); err != nil {
		return 0, 0, 0, err
	}
	d.pinnedAt = -1
	if err := d.be.HostInto(d.paramsPinned, d.paramArena, 0); err != nil {
		return 0, 0, 0, fmt.Errorf("dqn: device learner: %w", err)
	}
	nValid := 0
	if tr != nil && tr.ValidTensor != nil && tr.ValidTensor.Shape().TotalSize() <= len(d.validPinned) {
		nValid = tr.ValidTensor.Shape().TotalSize()
		if err := d.be.TensorInto(d.validPinned[:nValid], tr.ValidTensor); err != nil {
			return 0, 0, 0, fmt.Errorf("dqn: device learner: %w", err)
		}
	}
	loss, err := d.Loss()
	if err != nil {
		return 0, 0, 0, err
	}
	d.pinnedAt = d.Steps()
	valid := 0
	for _, v := range d.validPinned[:nValid] {
		if v != 0 {
			valid++
		}
	}
	return loss, valid, nValid, nil
}

// pin allocates the pinned memory roundEnd copies into, once.
func (d *deviceTrainLearner) pin() error {
	if d.paramsPinned != nil {
		return nil
	}
	p, err := d.be.AllocPinned(4 * int64(d.nparam))
	if err != nil {
		return fmt.Errorf("dqn: device learner: %w", err)
	}
	v, err := d.be.AllocPinned(int64(d.cfg.BatchSize))
	if err != nil {
		_ = d.be.FreePinned(p)
		return fmt.Errorf("dqn: device learner: %w", err)
	}
	d.paramsPinned, d.validPinned = p, v
	return nil
}

// close frees the learner's memory and closes its backend, after the
// replay buffer on it has been closed.
func (d *deviceTrainLearner) close() error {
	if onDeviceTrainClose != nil {
		onDeviceTrainClose(d)
	}
	var errs []error
	if d.round != nil {
		errs = append(errs, d.round.Close())
		d.round = nil
	}
	if d.meta != nil {
		errs = append(errs, d.be.Free(d.meta))
	}
	for _, p := range [][]byte{d.paramsPinned, d.validPinned} {
		if p != nil {
			errs = append(errs, d.be.FreePinned(p))
		}
	}
	if d.DeviceLearner != nil {
		errs = append(errs, d.DeviceLearner.Close())
	}
	errs = append(errs, d.be.Close())
	return errors.Join(errs...)
}
