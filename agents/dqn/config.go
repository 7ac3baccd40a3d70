package dqn

import (
	"fmt"
	"math"

	"github.com/trajring/trajring/cpu"
	"github.com/trajring/trajring/driver"
	"github.com/trajring/trajring/tensorbuf"
)

// TrainConfig configures RunCartPole. Every field is used as given: zero
// means zero (no learning starts, gamma 0, no exploration), and a value
// that makes no sense, zero or not, is refused with a *FieldError. Start
// from DefaultTrainConfig and change what differs.
type TrainConfig struct {
	Agent Config // see DefaultConfig
	// Steps is the number of env steps (at least 1).
	Steps int
	// BufferSize is the replay capacity in transitions (at least 2).
	BufferSize int
	// LearningStarts is the env steps collected before training.
	LearningStarts int
	// Gamma is the discount factor, in [0, 1].
	Gamma float64
	// NStep is the n of n-step targets (at least 1, below BufferSize).
	NStep int
	// TargetUpdateInterval is in env steps, as in SB3 (at least 1).
	TargetUpdateInterval int
	// TrainFreq env steps (at least 1) are collected between training
	// rounds of GradientSteps gradient steps.
	TrainFreq, GradientSteps int
	// ExplorationFraction of Steps takes epsilon from 1 to
	// ExplorationFinalEps (both in [0, 1]; a fraction of 0 starts at the
	// final epsilon).
	ExplorationFraction, ExplorationFinalEps float64
	// LearningRateEnd is Adam's learning rate at the end of the run: it
	// falls linearly from Agent.LearningRate over Steps, as RL Zoo's lin_
	// schedules do, so that late updates are small and the last network
	// stays near the good ones before it (equal to Agent.LearningRate: a
	// constant rate). It must be finite, at least 0 and at most
	// Agent.LearningRate: a rising schedule is refused.
	LearningRateEnd float64
	// Prioritized samples from a prioritized table (priority exponent
	// Alpha > 0, importance-weight exponent Beta in [0, 1] annealed to 1
	// over the run); otherwise uniformly as SB3's DQN does, and Alpha and
	// Beta are not used.
	Prioritized bool
	Alpha, Beta float64
	// EvalEpisodes greedy episodes (at least 1) are run every EvalEvery
	// env steps (0: never) on their own environments, and at the end for
	// the best and the last network (see Result).
	EvalEpisodes, EvalEvery int
	// StopOnReturn, when positive, ends the run after the first
	// evaluation whose mean return reaches it, as SB3's
	// StopTrainingOnRewardThreshold callback does: further updates can
	// only lose a policy that already holds the pole for every evaluation
	// episode, and DQN on CartPole often does. Zero or negative: never.
	StopOnReturn float64
	// Backend chooses the learner and the replay buffer's backend:
	// BackendCPU ("cpu"; "" and BackendDefault are the same) trains Agent
	// on the host from a buffer on the cpu backend; BackendGPU ("gpu",
	// trajring_cuda builds only) trains DeviceLearner on a gpu backend
	// that the buffer shares, so that sampled transitions are read in
	// place (RunCartPole fails with gpu.ErrNoDevice's error when no GPU
	// is usable). Both write networks and checkpoints in one format.
	Backend string
	// Seed seeds the environments, exploration, table and weights (the
	// weights from Agent.Seed instead when that is not 0).
	Seed uint64
	// Progress, when set, is called after every training round and
	// evaluation.
	Progress func(Progress)

	// CheckpointDir with CheckpointEvery > 0 checkpoints the whole run
	// (replay buffer and table, networks, the best network so far, Adam,
	// counters, epsilon, beta and learning-rate schedule positions,
	// random sources, training-return window and the Progress history)
	// into CheckpointDir at the end of the first training round that
	// reaches every multiple of CheckpointEvery env steps, and at the end
	// of the run; see ManifestFile for the files and why a crash never
	// leaves a torn checkpoint.
	CheckpointDir   string
	CheckpointEvery int
	// CheckpointCompress zstd-compresses the replay checkpoint's chunks
	// (tensorbuf.SaveOptions.Compress; DefaultTrainConfig sets it).
	CheckpointCompress bool
	// Resume continues the run checkpointed in CheckpointDir (ErrNoCheckpoint
	// when there is none). The configuration must equal the checkpoint's
	// (ErrConfig names the fields that differ) except for Steps (a larger
	// value extends the run; the epsilon, beta and learning-rate
	// schedules, which are fractions of Steps, stretch with it), the
	// evaluation settings, the callbacks and the checkpoint settings.
	//
	// A resumed run continues with exactly the saved replay contents,
	// table (priorities, sampler random source), weights, Adam state,
	// counters and policy random source, but the environment is reset:
	// the episode in flight at the checkpoint is cut. Its steps stay in
	// the buffer; the first step after the resume makes the last saved one
	// a cut (the buffer's Stats count it), the new observer never joins
	// steps across it, so no item spans the old and new episodes, and its
	// partial return is not counted. The environment is seeded from Seed
	// and the checkpoint's env steps (not Seed alone, which would replay
	// the first episodes' starts), so a resume is deterministic; it does
	// not reproduce the uninterrupted run's later episodes. Elapsed and the
	// other timings continue from the checkpoint's, excluding the time
	// the run was stopped.
	Resume bool
	// OnResume, when set, is called once on resume, before training
	// continues, with the Progress of every training round up to the
	// checkpoint (to rewrite logs and curves that went further).
	OnResume func(history []Progress)
	// Interrupt, when set, ends the run early once it is closed (or
	// receives), as a stop does, so that a caught SIGINT leaves a usable
	// run: collection stops between two env steps (the steps taken are
	// kept and counted), the round's gradient steps are skipped, the
	// round is reported as any other (Progress, an evaluation if it
	// reaches a multiple of EvalEvery), a checkpoint is written when
	// checkpoints are on and the last one is older, and RunCartPole
	// returns the Result with Interrupted set, without the final
	// evaluations. A resume continues from that checkpoint. A canceled
	// ctx, by contrast, ends the run with ctx's error and writes nothing
	// more. Interrupt is not checkpointed.
	Interrupt <-chan struct{}
	// Observers are further observers of the collection driver (an
	// observer.MetricsLog, say), called after the replay observer on every
	// collected step. They are not checkpointed, and a resume may pass
	// others.
	Observers []driver.Observer

	// tests: called after each checkpoint, and after a resume loaded one
	afterCheckpoint func(gen uint64, a *Agent, buf *tensorbuf.Buffer)
	afterResume     func(a *Agent, buf *tensorbuf.Buffer)
}

// DefaultTrainConfig returns RL Baselines3 Zoo's tuned DQN settings for
// CartPole-v1 (hyperparams/dqn.yml: 50k steps, buffer 100k, learning
// starts 1000, gamma 0.99, target update every 10 env steps, 128
// gradient steps every 256 env steps, epsilon to 0.04 over 16% of the
// run) with the network of DefaultConfig, plus what `trajring train`
// adds: prioritized replay (alpha 0.6, beta 0.4), a learning rate
// falling linearly to 0 (RL Zoo's lin_ schedule), 100 greedy evaluation
// episodes every 2,500 env steps to pick the best network (RL Zoo's
// EvalCallback), a stop once an evaluation reaches 500 (CartPole-v1's
// maximum: every episode reached the time limit), and seed 1. Each call returns a new value; it is
// safe for concurrent use.
func DefaultTrainConfig() TrainConfig {
	return TrainConfig{
		Agent: DefaultConfig(), Steps: 50_000, BufferSize: 100_000, LearningStarts: 1_000, Gamma: 0.99, NStep: 1,
		TargetUpdateInterval: 10, TrainFreq: 256, GradientSteps: 128, ExplorationFraction: 0.16, ExplorationFinalEps: 0.04,
		LearningRateEnd: 0, Prioritized: true, Alpha: 0.6, Beta: 0.4, EvalEpisodes: 100, EvalEvery: 2_500,
		StopOnReturn: 500, Seed: 1, CheckpointCompress: true,
	}
}

// Validate checks the configuration as RunCartPole does before it
// allocates anything: every field's range (a *FieldError naming the
// first bad field), and that the learner's and the evaluations' memory
// fits the host's available memory (the replay buffer's is checked by
// tensorbuf.New). Agent.ObsDim and Agent.NumActions are not checked:
// RunCartPole sets them from the environment. It is safe for concurrent
// use.
func (c TrainConfig) Validate() error {
	in01 := func(v float64) bool { return v >= 0 && v <= 1 }
	switch {
	case c.Steps < 1:
		return fieldErr("Steps", c.Steps, "at least 1")
	case c.BufferSize < 2:
		return fieldErr("BufferSize", c.BufferSize, "at least 2")
	case c.LearningStarts < 0:
		return fieldErr("LearningStarts", c.LearningStarts, "at least 0")
	case !in01(c.Gamma):
		return fieldErr("Gamma", c.Gamma, "a number from 0 to 1")
	case c.NStep < 1 || c.NStep >= c.BufferSize:
		return fieldErr("NStep", c.NStep, fmt.Sprintf("from 1 to %d, below the replay capacity", c.BufferSize-1))
	case c.TargetUpdateInterval < 1:
		return fieldErr("TargetUpdateInterval", c.TargetUpdateInterval, "at least 1")
	case c.TrainFreq < 1:
		return fieldErr("TrainFreq", c.TrainFreq, "at least 1")
	case c.GradientSteps < 0:
		return fieldErr("GradientSteps", c.GradientSteps, "at least 0")
	case !in01(c.ExplorationFraction):
		return fieldErr("ExplorationFraction", c.ExplorationFraction, "a number from 0 to 1")
	case !in01(c.ExplorationFinalEps):
		return fieldErr("ExplorationFinalEps", c.ExplorationFinalEps, "a number from 0 to 1")
	case !(c.LearningRateEnd >= 0) || math.IsInf(c.LearningRateEnd, 1):
		return fieldErr("LearningRateEnd", c.LearningRateEnd, "a finite number at least 0")
	case c.Prioritized && (!(c.Alpha > 0) || math.IsInf(c.Alpha, 1)):
		return fieldErr("Alpha", c.Alpha, "a positive finite number")
	case c.Prioritized && !in01(c.Beta):
		return fieldErr("Beta", c.Beta, "a number from 0 to 1")
	case c.EvalEpisodes < 1:
		return fieldErr("EvalEpisodes", c.EvalEpisodes, "at least 1")
	case math.IsNaN(c.StopOnReturn):
		return fieldErr("StopOnReturn", c.StopOnReturn, "a number (0 or negative: never stop early)")
	case c.EvalEvery < 0:
		return fieldErr("EvalEvery", c.EvalEvery, "at least 0 (0: no evaluations during training)")
	case c.CheckpointEvery < 0:
		return fieldErr("CheckpointEvery", c.CheckpointEvery, "at least 0")
	case (c.CheckpointEvery > 0 || c.Resume) && c.CheckpointDir == "":
		return fmt.Errorf("%w: checkpoints and resume need a CheckpointDir", ErrConfig)
	}
	if err := checkBackend(c.Backend); err != nil {
		return err
	}
	if err := c.Agent.validate("Agent.", false); err != nil {
		return err
	}
	if c.LearningRateEnd > c.Agent.LearningRate {
		return fieldErr("LearningRateEnd", c.LearningRateEnd,
			fmt.Sprintf("at most the starting learning rate %g: the rate falls linearly to it", c.Agent.LearningRate))
	}
	if c.Agent.BatchSize > c.BufferSize {
		return fieldErr("Agent.BatchSize", c.Agent.BatchSize, fmt.Sprintf("at most the replay capacity, %d", c.BufferSize))
	}
	return c.checkMemory(cartPoleObsDim, cartPoleActions)
}

// CartPole-v1's sizes, for the memory check before the env exists.
const cartPoleObsDim, cartPoleActions = 4, 2

// memAvailable reports the host memory new allocations can take (a
// variable for tests).
var memAvailable = cpu.MemAvailable

// checkMemory estimates, in float64 so that nothing overflows, what the
// learner (networks, Adam, the graph's per-batch tensors) and an
// evaluation (one environment and forward pass per episode, all at once)
// allocate, and refuses a configuration that does not fit the available
// memory, naming the field that takes the most. Without a memory report
// only the field ranges apply.
func (c TrainConfig) checkMemory(obsDim, actions int) error {
	avail, err := memAvailable()
	if err != nil {
		return nil
	}
	dims := append(append([]float64{float64(obsDim)}, intsToFloats(c.Agent.Hidden)...), float64(actions))
	var params, units float64
	for l := 0; l+1 < len(dims); l++ {
		params += (dims[l] + 1) * dims[l+1]
		units += dims[l+1]
	}
	// online (graph value and gradient), target, Adam's two moments, the
	// best network and the copies a checkpoint encodes
	netBytes := 4 * 8 * params
	// per batch row: inputs and targets, each layer's product, sum and
	// activation with their gradients, and the two target forward passes
	batchBytes := 4 * float64(c.Agent.BatchSize) * (2*dims[0] + 8*units + 16)
	// per episode: the environment's state and buffers, the policy's
	// observation, actions and Q-values, the forward pass's layers
	evalBytes := float64(c.EvalEpisodes) * (256 + 4*2*(dims[0]+units))
	if netBytes+batchBytes+evalBytes <= float64(avail) {
		return nil
	}
	need := fmt.Sprintf("memory for it (%.3g GB, %.3g GB available)", (netBytes+batchBytes+evalBytes)/1e9, float64(avail)/1e9)
	switch max(netBytes, batchBytes, evalBytes) {
	case evalBytes:
		return fieldErr("EvalEpisodes", c.EvalEpisodes, "fewer episodes: one evaluation runs them all at once and there is not "+need)
	case batchBytes:
		return fieldErr("Agent.BatchSize", c.Agent.BatchSize, "a smaller batch: there is not "+need)
	default:
		return fieldErr("Agent.Hidden", c.Agent.Hidden, "smaller layers: there is not "+need)
	}
}

func intsToFloats(xs []int) []float64 {
	out := make([]float64, len(xs))
	for i, x := range xs {
		out[i] = float64(x)
	}
	return out
}
