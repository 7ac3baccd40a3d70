//go:build trajring_cuda

package dqn

import (
	"errors"
	"fmt"

	"github.com/trajring/trajring/driver"
	"github.com/trajring/trajring/gpu"
	"github.com/trajring/trajring/kernels"
	"github.com/trajring/trajring/tensorbuf"
	"gorgonia.org/tensor"
)

// gpuBuild reports whether this build has DeviceLearner.
const gpuBuild = true

// deviceTrainLearner is DeviceLearner as a trainer's learner, on a gpu
// backend of its own that the replay buffer shares. A step's transitions
// are the table's device tensors, read in place; their host-selected
// validity mask and (prioritized) importance weights go up to the
// device, and nothing comes back unless the table is prioritized and
// host-selected, when the new priorities do (updatePriorities).
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
}

// newDeviceTrainLearner starts a gpu backend (an error wrapping
// gpu.ErrNoDevice when there is no usable GPU) and a DeviceLearner on it.
func newDeviceTrainLearner(cfg Config, prioritized bool) (_ learner, _ tensorbuf.Backend, err error) {
	be, err := gpu.New()
	if err != nil {
		return nil, nil, err
	}
	d := &deviceTrainLearner{be: be, prioritized: prioritized, validHost: make([]byte, cfg.BatchSize), prio: make([]float32, cfg.BatchSize)}
	defer func() {
		if err != nil {
			_ = d.close()
		}
	}()
	if d.DeviceLearner, err = NewDeviceLearner(cfg, be); err != nil {
		return nil, nil, err
	}
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
func (d *deviceTrainLearner) agent() *Agent              { return nil }

// evalQFunc plays evaluations on a host copy of the network: one copy of
// the weights instead of the Q-values of every evaluation step.
func (d *deviceTrainLearner) evalQFunc(obs string) (driver.QFunc, error) {
	n, err := d.Network()
	if err != nil {
		return nil, err
	}
	return n.QFunc(obs), nil
}

// load uploads the batch's validity mask and, prioritized, its
// importance weights, and takes the transitions' device tensors.
func (d *deviceTrainLearner) load(tr *tensorbuf.TableTransitions, obs, act string) error {
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
		if err := d.be.Upload(d.meta, d.wOff, f64Bytes(tr.Weights)); err != nil {
			return fmt.Errorf("dqn: device learner: %w", err)
		}
		w = d.w
	}
	var err error
	d.batch, err = d.BatchFromTransitions(&tr.Transitions, obs, act, w, d.valid)
	return err
}

func (d *deviceTrainLearner) train() (float64, error) { return 0, d.TrainStep(d.batch) }

// updatePriorities copies the step's priorities to the host (waiting for
// the step) for the host-selected table: 4 bytes a transition.
func (d *deviceTrainLearner) updatePriorities(table *tensorbuf.Table, keys []uint64) error {
	if err := d.download(d.prio, d.Priorities()); err != nil {
		return err
	}
	return table.UpdatePriorities32(keys, d.prio)
}

// roundEnd waits for the device and copies the last step's loss back (a
// metric: the round's loss on the device is its last step's).
func (d *deviceTrainLearner) roundEnd(_ float64, steps int) (float64, error) {
	if err := d.be.Sync(); err != nil {
		return 0, fmt.Errorf("dqn: device learner: %w", err)
	}
	if steps == 0 {
		return 0, nil
	}
	return d.Loss()
}

// close frees the learner's memory and closes its backend, after the
// replay buffer on it has been closed.
func (d *deviceTrainLearner) close() error {
	var errs []error
	if d.meta != nil {
		errs = append(errs, d.be.Free(d.meta))
	}
	if d.DeviceLearner != nil {
		errs = append(errs, d.DeviceLearner.Close())
	}
	errs = append(errs, d.be.Close())
	return errors.Join(errs...)
}
