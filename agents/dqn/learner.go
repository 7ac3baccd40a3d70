package dqn

import (
	"fmt"
	"io"

	"github.com/trajring/trajring/cpu"
	"github.com/trajring/trajring/driver"
	"github.com/trajring/trajring/tensorbuf"
)

// learner is what a RunCartPole trainer needs of its DQN learner: Agent
// on the host (hostLearner) or, in trajring_cuda builds, DeviceLearner on
// the replay buffer's gpu backend (TrainConfig.Backend "gpu"). A gradient
// step is load (the sampled transitions into the learner's batch), train
// and, for a prioritized table, updatePriorities, so that the trainer
// times sampling and training apart as before.
type learner interface {
	Steps() int64
	SetLearningRate(lr float64) error
	SaveState(w io.Writer) error
	LoadState(r io.Reader) error
	// QFunc is the policy's Q-function over observation field name.
	QFunc(name string) driver.QFunc
	// updateTarget copies the online network into the target network.
	updateTarget() error
	// network copies the online network to the host.
	network() (*Network, error)
	// evalQFunc returns the Q-function greedy evaluations play.
	evalQFunc(obs string) (driver.QFunc, error)
	// load takes tr (just sampled) as the next step's batch.
	load(tr *tensorbuf.TableTransitions, obs, act string) error
	// train takes one gradient step on the loaded batch and returns its
	// loss, or 0 when the loss stays on the device (see roundEnd).
	train() (float64, error)
	// updatePriorities sets the priorities of tr's keys in table from
	// the last step's TD errors.
	updatePriorities(table *tensorbuf.Table, tr *tensorbuf.TableTransitions) error
	// deviceSelection reports whether the replay table should select
	// on its backend (TableConfig.DeviceSelection).
	deviceSelection() bool
	// roundEnd waits for the round's queued work and returns the round's
	// loss given the sum of train's returns over steps gradient steps,
	// and for a device-selected sample tr (the round's last) the number
	// of its valid transitions and its size (0, 0 otherwise).
	roundEnd(lossSum float64, steps int, tr *tensorbuf.TableTransitions) (loss float64, valid, n int, err error)
	// bytesToHost is the backend's device-to-host bytes so far (0 on
	// the host).
	bytesToHost() int64
	// counts is the backend's kernel launches, host syncs and
	// device-to-host copies so far (all 0 on the host).
	counts() backendCounts
	// agent is the host learner, nil on a device.
	agent() *Agent
	close() error
}

// newLearner makes cfg's learner (cfg.Agent complete) and the backend of
// its replay buffer.
func newLearner(cfg TrainConfig) (learner, tensorbuf.Backend, error) {
	if cfg.Backend == BackendGPU {
		return newDeviceTrainLearner(cfg.Agent, cfg.Prioritized)
	}
	a, err := New(cfg.Agent)
	if err != nil {
		return nil, nil, err
	}
	return &hostLearner{Agent: a, batch: a.NewBatch(), prio: make([]float32, cfg.Agent.BatchSize)}, cpu.New(), nil
}

// hostLearner is Agent as a trainer's learner, with its batch.
type hostLearner struct {
	*Agent
	batch *Batch
	prio  []float32
}

func (h *hostLearner) updateTarget() error                        { h.UpdateTarget(); return nil }
func (h *hostLearner) network() (*Network, error)                 { return h.Network(), nil }
func (h *hostLearner) evalQFunc(obs string) (driver.QFunc, error) { return h.QFunc(obs), nil }
func (h *hostLearner) train() (float64, error)                    { return h.Train(h.batch) }
func (h *hostLearner) bytesToHost() int64                         { return 0 }
func (h *hostLearner) counts() backendCounts                      { return backendCounts{} }
func (h *hostLearner) agent() *Agent                              { return h.Agent }
func (h *hostLearner) close() error                               { return nil }
func (h *hostLearner) deviceSelection() bool                      { return false }

func (h *hostLearner) load(tr *tensorbuf.TableTransitions, obs, act string) error {
	return h.FromTransitions(h.batch, tr, obs, act)
}

func (h *hostLearner) updatePriorities(table *tensorbuf.Table, tr *tensorbuf.TableTransitions) error {
	h.Priorities(h.batch, h.prio)
	return table.UpdatePriorities32(tr.Keys, h.prio)
}

func (h *hostLearner) roundEnd(lossSum float64, steps int, _ *tensorbuf.TableTransitions) (float64, int, int, error) {
	if steps == 0 {
		return 0, 0, 0, nil
	}
	return lossSum / float64(steps), 0, 0, nil
}

// backendCounts is what a learner's backend has counted so far: kernel
// launches, host waits for the device (syncs) and device-to-host copies
// (gpu.Backend's Launches, Syncs and CopiesToHost).
type backendCounts struct {
	launches, syncs, copies int64
	graphs                  int64 // CUDA graphs launched (the device learner's replayed steps)
}

// Backends of TrainConfig.Backend.
const (
	BackendDefault = "default" // the cpu learner, as BackendCPU
	BackendCPU     = "cpu"     // Agent, the replay buffer on the cpu backend
	BackendGPU     = "gpu"     // DeviceLearner, the replay buffer on the gpu backend
)

// LearnerBackend names the learner TrainConfig.Backend b chooses:
// BackendCPU for "", BackendDefault and BackendCPU, which are the same
// learner, and b itself otherwise. It is safe for concurrent use.
func LearnerBackend(b string) string {
	if b == "" || b == BackendDefault {
		return BackendCPU
	}
	return b
}

// checkBackend checks TrainConfig.Backend.
func checkBackend(b string) error {
	switch b {
	case "", BackendDefault, BackendCPU:
		return nil
	case BackendGPU:
		if !gpuBuild {
			return fieldErr("Backend", b, "cpu: this build has no gpu learner (build with -tags trajring_cuda)")
		}
		return nil
	}
	return fieldErr("Backend", b, fmt.Sprintf("%s, %s or %s", BackendDefault, BackendCPU, BackendGPU))
}
