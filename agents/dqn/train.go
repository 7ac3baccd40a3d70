package dqn

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"time"

	"github.com/trajring/trajring/driver"
	"github.com/trajring/trajring/driver/envs"
	"github.com/trajring/trajring/observer"
	"github.com/trajring/trajring/tensorbuf"
)

// Progress is a snapshot of a run, passed to TrainConfig.Progress.
type Progress struct {
	EnvSteps      int64   `json:"env_steps"`
	GradientSteps int64   `json:"gradient_steps"`
	Episodes      int64   `json:"episodes"`
	Epsilon       float64 `json:"epsilon"`
	Loss          float64 `json:"loss"`          // mean over the last round
	TrainReturn   float64 `json:"train_return"`  // mean of the last 100 training episodes
	LearningRate  float64 `json:"learning_rate"` // Adam's rate in the last round
	// EvalReturn is the mean return of the greedy evaluation after this
	// round; nil (left out of JSON) when there was none.
	EvalReturn    *float64 `json:"eval_return,omitempty"`
	Elapsed       float64  `json:"elapsed_s"`      // since the start
	SampleSeconds float64  `json:"sample_s"`       // learner time sampling and updating priorities
	TrainSeconds  float64  `json:"train_s"`        // learner time in the gradient steps
	CollectSecs   float64  `json:"collect_s"`      // time collecting env steps
	ValidFraction float64  `json:"valid_fraction"` // of sampled transitions (device-selected: the round's last batch)
	// GradStepsPerSec is the last round's gradient steps over its
	// learner time (sampling, training, priority updates, and on the gpu
	// backend the wait for the device at the round's end).
	GradStepsPerSec float64 `json:"grad_steps_per_s"`
	// D2HPerGradStep is the bytes the learner's backend copied from
	// device to host during the last round's gradient steps, per step
	// (the loss and evaluations are copied after them and not counted):
	// always 0 on the cpu backend; 0 on the gpu backend, whose table
	// selects on the device, except in the few rounds in which a
	// prioritized table's device mirror grows (the host then learns the
	// device's priorities) and with a host-selected table restored from
	// an older checkpoint (the priorities, 4 bytes a transition). D2HBytes is the backend's
	// device-to-host bytes since the run (or its resume) started, all
	// included: acting, losses, evaluations, checkpoints.
	D2HPerGradStep float64 `json:"d2h_bytes_per_grad_step"`
	D2HBytes       int64   `json:"d2h_bytes"`
	// LaunchesPerGradStep, SyncsPerRound and D2HCopiesPerEnvStep are
	// counted by the learner's backend (gpu.Backend's Launches, Syncs and
	// CopiesToHost: the calls trajring makes, so a real GPU and the
	// stand-in driver report the same figures), all 0 on the cpu
	// backend. LaunchesPerGradStep is the last round's kernel launches
	// from its first sample to the end of its gradient steps (sampling,
	// training, priority updates and the round's end) over its gradient
	// steps, 0 in a round without any. SyncsPerRound is the host's waits
	// for the device from the start of the round's collection to the end
	// of its gradient steps (evaluations and checkpoints after them not
	// included): 1 on the gpu backend (the round's end: its loss, the
	// policy's copy of the network and the last sample's validity come
	// back together), plus 1 in a round in which the table's device
	// mirror grows. D2HCopiesPerEnvStep is the device-to-host copies made
	// while the round's env steps were collected (the policy acting),
	// over those env steps: 0 on the gpu backend once a round has
	// trained (the policy acts on a host copy of the network, see
	// deviceTrainLearner.QFunc), 1/TrainFreq before (one copy of the
	// weights). GraphLaunchesPerRound is the CUDA graphs the round's
	// gradient steps launched (each counted once in LaunchesPerGradStep
	// too): one a gradient step when the learner replays its captured
	// step (DeviceLearner.UseGraph), 0 when it launches kernel by kernel
	// and on the cpu backend.
	LaunchesPerGradStep   float64 `json:"launches_per_grad_step"`
	SyncsPerRound         int64   `json:"syncs_per_round"`
	D2HCopiesPerEnvStep   float64 `json:"d2h_copies_per_env_step"`
	GraphLaunchesPerRound int64   `json:"graph_launches_per_round"`
}

// Result is what RunCartPole returns. As RL Zoo's EvalCallback does, a
// run keeps the network of its best evaluation besides the last one: DQN
// on CartPole can lose a solved policy within a few thousand steps, and
// the network a user is handed should be the best one found.
type Result struct {
	// Agent holds the last network of the cpu backend's learner (nil on
	// the gpu backend); Network is a host copy of the last network, on
	// either backend. Last is the last round's Progress.
	Agent   *Agent
	Network *Network
	Last    Progress
	// Best is a copy of the network of the evaluation during training
	// with the highest mean return (the first of equals), found at
	// BestEnvSteps with that mean BestEvalReturn; nil, and -1, when no
	// evaluation ran (EvalEvery 0).
	Best           *Network
	BestEnvSteps   int64
	BestEvalReturn float64
	// EvalReturn is the mean return of EvalEpisodes greedy episodes after
	// training of the network handed out: Best, or the last network when
	// there is no Best. LastEvalReturn is the last network's, on the same
	// episodes (the same starts); both on episodes of their own, not those
	// that chose Best, so that neither is biased by the choice.
	EvalReturn, LastEvalReturn float64
	// FirstSolved is the env steps at the first evaluation reaching 475
	// (-1 if none did).
	FirstSolved int64
	// Stopped reports that an evaluation reached StopOnReturn and ended
	// the run at Last.EnvSteps.
	Stopped bool
	// Interrupted reports that TrainConfig.Interrupt ended the run at
	// Last.EnvSteps: Network and Best are as they were then, and, with no
	// final evaluations, EvalReturn and LastEvalReturn are NaN.
	// Checkpointed reports that the run's state at Last.EnvSteps is in
	// CheckpointDir's newest checkpoint (always so at the end of a run
	// with checkpoints on).
	Interrupted, Checkpointed bool
}

// RunCartPole trains a DQN agent on CartPole-v1 (one environment, as RL
// Zoo does) through trajring: an AddTrajectory observer writes windows of
// NStep+1 steps into a table, and every training round samples them as
// transitions (Table.SampleTransitionsInto), trains and, with
// Prioritized, updates priorities from the TD errors. It is not safe for
// concurrent use of one TrainConfig's Progress.
func RunCartPole(ctx context.Context, cfg TrainConfig) (*Result, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	t, err := newTrainer(cfg)
	if err != nil {
		return nil, err
	}
	defer t.close()
	lastTarget := t.p.EnvSteps
	// Collection also stops at an interrupt (cctx); the rest of the
	// round runs on ctx.
	cctx := ctx
	if cfg.Interrupt != nil && ctx.Done() == nil {
		// A context that cannot be canceled: the interrupt is the only
		// way collection ends early, and the driver sees it at its next
		// step, not once a goroutine has run.
		cctx = interruptContext{ctx, cfg.Interrupt}
	} else if cfg.Interrupt != nil {
		var cancel context.CancelFunc
		cctx, cancel = context.WithCancel(ctx)
		defer cancel()
		go func() {
			select {
			case <-cfg.Interrupt:
				cancel()
			case <-cctx.Done():
			}
		}()
	}
	interrupted := func() bool {
		select {
		case <-cfg.Interrupt: // a nil channel never is
			return true
		default:
			return false
		}
	}
	// A run that stopped on StopOnReturn is complete, as one that
	// reached Steps: its resume only evaluates.
	for t.p.EnvSteps < int64(t.cfg.Steps) && !t.res.Stopped {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if interrupted() {
			t.res.Interrupted = true
			break
		}
		if err := t.collect(cctx); err != nil {
			if ctx.Err() != nil || !interrupted() {
				return nil, err
			}
			t.res.Interrupted = true // mid-round: collect counted the steps taken
			if t.drv.Stats().Steps == 0 {
				break // nothing new to report
			}
		}
		if t.p.EnvSteps/int64(t.cfg.TargetUpdateInterval) != lastTarget/int64(t.cfg.TargetUpdateInterval) {
			if err := t.l.updateTarget(); err != nil {
				return nil, err
			}
		}
		lastTarget = t.p.EnvSteps
		if !t.res.Interrupted {
			if err := t.learn(ctx); err != nil {
				return nil, err
			}
		}
		if err := t.report(); err != nil {
			return nil, err
		}
		if err := t.checkpoint(t.res.Interrupted); err != nil {
			return nil, err
		}
		if t.res.Interrupted {
			break
		}
	}
	if t.res.Interrupted {
		return t.finishInterrupted()
	}
	return t.finish()
}

// trainer is one RunCartPole run: its environment, learner (Agent, or
// DeviceLearner on the gpu backend: see learner), replay buffer and
// table, and the state a checkpoint saves. Not safe for concurrent use.
type trainer struct {
	cfg              TrainConfig
	start            time.Time // shifted back by a resumed run's elapsed time
	obsName, actName string
	l                learner
	be               tensorbuf.Backend // the buffer's, the learner's on a device
	buf              *tensorbuf.Buffer
	table            *tensorbuf.Table
	obs              *observer.AddTrajectory
	pol              *driver.EpsilonGreedyPolicy
	drv              *driver.StepDriver
	gen              uint64 // of the next checkpoint
	savedAt          int64  // env steps of the newest checkpoint (0: none, or at 0)

	res     *Result
	p       Progress
	history []Progress
	evals   int64 // evaluations run, for their seeds
	rets    returnWindow

	ts    *driver.TimeStep
	state any
	tr    *tensorbuf.TableTransitions
	nopt  tensorbuf.NStepOptions
	d2h0  int64 // the backend's device-to-host bytes at the start
	// round0 is the backend's counts at the start of the round's
	// collection.
	round0 backendCounts
}

// newTrainer builds a run's parts, from cfg.CheckpointDir's newest
// checkpoint when cfg.Resume is set. On error it releases what it made.
func newTrainer(cfg TrainConfig) (_ *trainer, err error) {
	t := &trainer{cfg: cfg, start: time.Now()}
	defer func() {
		if err != nil {
			t.close()
		}
	}()
	env, err := envs.NewCartPole(1, cfg.Seed)
	if err != nil {
		return nil, err
	}
	t.obsName, t.actName = env.ObservationSpec()[0].Name, env.ActionSpec()[0].Name
	t.cfg.Agent.ObsDim = env.ObservationSpec()[0].Elems()
	t.cfg.Agent.NumActions = int(env.ActionSpec()[0].Max[0]) + 1
	if t.cfg.Agent.Seed == 0 {
		t.cfg.Agent.Seed = cfg.Seed
	}
	if t.l, t.be, err = newLearner(t.cfg); err != nil {
		return nil, err
	}
	t.d2h0 = t.l.bytesToHost()
	fields := append(append([]tensorbuf.Field(nil), env.ObservationSpec()...), env.ActionSpec()...)
	capacity := cfg.BufferSize + cfg.NStep + 1
	var st *loopState // the checkpoint resumed from
	if cfg.Resume {
		if st, t.buf, t.table, t.gen, err = resume(&t.cfg, t.l, t.be, fields, capacity); err != nil {
			return nil, err
		}
		t.savedAt = st.Progress.EnvSteps
		// A fresh start for the environment (see TrainConfig.Resume).
		if env, err = envs.NewCartPole(1, cfg.Seed^uint64(st.Progress.EnvSteps)*0x9e3779b97f4a7c15); err != nil {
			return nil, err
		}
	} else if err := t.newReplay(fields, capacity); err != nil {
		return nil, err
	}
	cfg = t.cfg
	if t.obs, err = observer.NewAddTrajectory(t.buf, observer.AddTrajectoryConfig{
		Tables:           []observer.TableSequence{{Table: "replay", SequenceLength: cfg.NStep + 1}},
		PadEndOfEpisodes: cfg.NStep > 1, TileEndOfEpisodes: cfg.NStep > 1,
	}); err != nil {
		return nil, err
	}
	t.rets = newReturnWindow(1, 100)
	sched := driver.LinearSchedule{Start: 1, End: cfg.ExplorationFinalEps, Steps: int64(cfg.ExplorationFraction * float64(cfg.Steps))}
	if t.pol, err = driver.NewEpsilonGreedyPolicy(t.actName, env.ActionSpec()[0].DType, cfg.Agent.NumActions, t.l.QFunc(t.obsName), sched, cfg.Seed); err != nil {
		return nil, err
	}
	t.res = &Result{Agent: t.l.agent(), FirstSolved: -1, BestEnvSteps: -1}
	if st != nil {
		if err := t.restore(st); err != nil {
			return nil, err
		}
	}
	if t.drv, err = driver.NewStepDriver(env, t.pol, cfg.TrainFreq, driver.WithObservers(append([]driver.Observer{t.obs, &t.rets}, cfg.Observers...)...)); err != nil {
		return nil, err
	}
	t.tr = new(tensorbuf.TableTransitions)
	t.nopt = tensorbuf.NStepOptions{Horizon: cfg.NStep, DiscountFactor: cfg.Gamma}
	return t, nil
}

// newReplay makes a fresh run's buffer and replay table.
func (t *trainer) newReplay(fields []tensorbuf.Field, capacity int) error {
	cfg := t.cfg
	var err error
	if t.buf, err = tensorbuf.New(tensorbuf.Config{NumEnvs: 1, Capacity: capacity, Fields: fields, Seed: cfg.Seed, Backend: t.be}); err != nil {
		return err
	}
	tc := tensorbuf.TableConfig{Name: "replay", Selector: tensorbuf.Uniform, MaxSize: cfg.BufferSize, Seed: cfg.Seed,
		DeviceSelection: t.l.deviceSelection()}
	if cfg.Prioritized {
		tc.Selector, tc.PriorityExponent, tc.Beta = tensorbuf.Prioritized, cfg.Alpha, cfg.Beta
	}
	if t.table, err = t.buf.NewTable(tc); err != nil {
		return err
	}
	if cfg.CheckpointEvery > 0 {
		t.gen = nextGeneration(cfg.CheckpointDir)
	}
	return nil
}

// restore sets the policy, best network, returns and progress of a
// resumed run from its checkpoint.
func (t *trainer) restore(st *loopState) error {
	if err := t.pol.UnmarshalBinary(st.Policy); err != nil {
		return fmt.Errorf("resume: %w", err)
	}
	res := t.res
	if st.Best != nil {
		var err error
		if res.Best, err = ReadNetwork(bytes.NewReader(st.Best)); err != nil {
			return fmt.Errorf("resume: best network: %w", err)
		}
		res.BestEnvSteps, res.BestEvalReturn = st.BestEnvSteps, st.BestEvalReturn
	}
	t.rets = st.Returns
	clear(t.rets.Acc) // the episodes in flight are cut
	t.p, t.history, res.FirstSolved, t.evals, res.Stopped = st.Progress, st.History, st.FirstSolved, st.Evals, st.Stopped
	t.start = t.start.Add(-time.Duration(t.p.Elapsed * float64(time.Second)))
	if t.cfg.OnResume != nil {
		t.cfg.OnResume(slices.Clone(t.history))
	}
	if t.cfg.afterResume != nil {
		t.cfg.afterResume(t.l.agent(), t.buf)
	}
	return nil
}

// close releases the run's transitions, observer and buffer, then the
// learner (and the backend they share).
func (t *trainer) close() {
	if t.tr != nil {
		t.tr.Release()
	}
	if t.obs != nil {
		t.obs.Close()
	}
	if t.buf != nil {
		t.buf.Close()
	}
	if t.l != nil {
		_ = t.l.close()
	}
}

// collect runs the driver for one round of TrainFreq env steps (fewer at
// the run's end) and counts them; a round that fails or is canceled
// counts the steps it took (each is in the buffer).
func (t *trainer) collect(ctx context.Context) error {
	t0 := time.Now()
	t.round0 = t.l.counts()
	t.drv.SetNumSteps(min(t.cfg.TrainFreq, t.cfg.Steps-int(t.p.EnvSteps)))
	var err error
	t.ts, t.state, err = t.drv.Run(ctx, t.ts, t.state)
	t.p.CollectSecs += time.Since(t0).Seconds()
	t.p.D2HCopiesPerEnvStep = float64(t.l.counts().copies-t.round0.copies) / float64(max(t.drv.Stats().Steps, 1))
	t.p.SyncsPerRound = t.l.counts().syncs - t.round0.syncs
	t.p.EnvSteps += t.drv.Stats().Steps
	t.p.Episodes += t.drv.Stats().Episodes
	t.pol.SetSteps(t.p.EnvSteps) // the policy's clock also counted boundary steps
	return err
}

// learn sets this round's learning rate (and beta) and, once
// LearningStarts env steps are stored, takes GradientSteps gradient
// steps on sampled transitions, updating their priorities, and measures
// the round's gradient steps/s and device-to-host bytes.
func (t *trainer) learn(ctx context.Context) (err error) {
	cfg, p, l := t.cfg, &t.p, t.l
	p.Loss, p.GradStepsPerSec, p.D2HPerGradStep, p.LaunchesPerGradStep, p.GraphLaunchesPerRound = 0, 0, 0, 0, 0
	defer func() { p.SyncsPerRound = l.counts().syncs - t.round0.syncs }()
	// The learning rate of this round, linear in the env steps over the
	// run (RL Zoo's lin_ schedules are linear in SB3's progress).
	frac := min(float64(p.EnvSteps)/float64(cfg.Steps), 1)
	lr := cfg.Agent.LearningRate + (cfg.LearningRateEnd-cfg.Agent.LearningRate)*frac
	if err := l.SetLearningRate(lr); err != nil {
		return err
	}
	p.LearningRate = lr
	if p.EnvSteps <= int64(cfg.LearningStarts) || cfg.GradientSteps <= 0 {
		return nil
	}
	if cfg.Prioritized {
		beta := cfg.Beta + (1-cfg.Beta)*float64(p.EnvSteps)/float64(cfg.Steps)
		if err := t.table.SetBeta(min(beta, 1)); err != nil {
			return err
		}
	}
	valid, total, lossSum := 0, 0, 0.0
	sampleS, trainS := 0.0, 0.0
	t0, d0, c0 := time.Now(), l.bytesToHost(), l.counts()
	// step makes one gradient step's calls: directly, or recorded into a
	// round's graph (roundLearner), whose capture runs nothing.
	step := func() error {
		t1 := time.Now()
		if err := t.table.SampleTransitionsInto(ctx, t.tr, cfg.Agent.BatchSize, t.nopt); err != nil {
			return err
		}
		if err := l.load(t.tr, t.obsName, t.actName); err != nil {
			return err
		}
		t2 := time.Now()
		loss, err := l.train()
		if err != nil {
			return err
		}
		t3 := time.Now()
		if cfg.Prioritized {
			if err := l.updatePriorities(t.table, t.tr); err != nil {
				return err
			}
		}
		for _, v := range t.tr.Valid {
			if v {
				valid++
			}
		}
		total += len(t.tr.Valid)
		sampleS += t2.Sub(t1).Seconds() + time.Since(t3).Seconds()
		trainS += t3.Sub(t2).Seconds()
		lossSum += loss
		return nil
	}
	replayed := false
	if rl, ok := l.(roundLearner); ok {
		if replayed, err = rl.learnRound(t.table, cfg.GradientSteps, step); err != nil {
			return err
		}
		// A round's graph runs everything at once: the time is training's.
		valid, total, lossSum, sampleS, trainS = 0, 0, 0, 0, 0
	}
	for i := 0; !replayed && i < cfg.GradientSteps; i++ {
		if err := step(); err != nil {
			return err
		}
	}
	p.SampleSeconds += sampleS
	p.TrainSeconds += trainS
	p.D2HPerGradStep = float64(l.bytesToHost()-d0) / float64(cfg.GradientSteps)
	t4 := time.Now()
	var lastValid, lastN int
	if p.Loss, lastValid, lastN, err = l.roundEnd(lossSum, cfg.GradientSteps, t.tr); err != nil {
		return err
	}
	// The wait for the device counts as training time; the copies of
	// the loss and the validity (metrics) as neither.
	p.TrainSeconds += time.Since(t4).Seconds()
	p.GradStepsPerSec = float64(cfg.GradientSteps) / time.Since(t0).Seconds()
	if total == 0 && lastN > 0 {
		// Selected on the device: the learner copied the validity of the
		// round's last batch with its loss.
		valid, total = lastValid, lastN
	} else if total == 0 {
		// Selected on the device: the host learns the validity of the
		// round's last batch only.
		if err := t.tr.HostMeta(); err != nil {
			return err
		}
		for _, v := range t.tr.Valid {
			if v {
				valid++
			}
		}
		total = max(len(t.tr.Valid), 1)
	}
	p.ValidFraction = float64(valid) / float64(total)
	c1 := l.counts()
	p.LaunchesPerGradStep = float64(c1.launches-c0.launches) / float64(cfg.GradientSteps)
	p.GraphLaunchesPerRound = c1.graphs - c0.graphs
	return nil
}

// roundLearner is a learner that can make a whole training round as one
// replayed graph (the device learner: deviceTrainLearner.learnRound).
// learnRound makes steps gradient steps, the calls of each made by step,
// and reports done; done false means nothing of the round ran and the
// caller makes its steps directly.
type roundLearner interface {
	learnRound(table *tensorbuf.Table, steps int, step func() error) (done bool, err error)
}

// evalSeed returns the seed of the next evaluation. Every evaluation runs
// on environments of its own seed (the first one's is Seed+1_000_003), so
// that a resumed run evaluates as the uninterrupted one would have; the
// final evaluations of the best and the last network share one.
func (t *trainer) evalSeed() uint64 {
	t.evals++
	return t.cfg.Seed + 1_000_003 + uint64(t.evals-1)*0x9e3779b97f4a7c15
}

// evaluate returns the mean return of q over EvalEpisodes greedy
// episodes on environments of the given seed.
func (t *trainer) evaluate(q driver.QFunc, seed uint64) (float64, error) {
	evalEnv, err := envs.NewCartPole(t.cfg.EvalEpisodes, seed)
	if err != nil {
		return 0, err
	}
	rets, err := GreedyReturns(q, t.cfg.Agent.NumActions, evalEnv, t.obsName, t.actName)
	if err != nil {
		return 0, err
	}
	return mean(rets), nil
}

// report fills the round's progress, evaluates the network every
// EvalEvery env steps (keeping the best), and passes the progress to
// cfg.Progress and the run's history.
func (t *trainer) report() error {
	cfg, p, res := t.cfg, &t.p, t.res
	p.GradientSteps = t.l.Steps()
	p.D2HBytes = t.l.bytesToHost() - t.d2h0
	p.TrainReturn = t.rets.Result()
	p.Epsilon = t.pol.Epsilon()
	p.EvalReturn = nil
	if cfg.EvalEvery > 0 && p.EnvSteps/int64(cfg.EvalEvery) != (p.EnvSteps-int64(t.drv.Stats().Steps))/int64(cfg.EvalEvery) {
		q, err := t.l.evalQFunc(t.obsName)
		if err != nil {
			return err
		}
		ret, err := t.evaluate(q, t.evalSeed())
		if err != nil {
			return err
		}
		p.EvalReturn = &ret
		if ret >= 475 && res.FirstSolved < 0 {
			res.FirstSolved = p.EnvSteps
		}
		if res.Best == nil || ret > res.BestEvalReturn {
			if res.Best, err = t.l.network(); err != nil {
				return err
			}
			res.BestEnvSteps, res.BestEvalReturn = p.EnvSteps, ret
		}
		res.Stopped = cfg.StopOnReturn > 0 && ret >= cfg.StopOnReturn
	}
	p.Elapsed = time.Since(t.start).Seconds()
	if cfg.Progress != nil {
		cfg.Progress(*p)
	}
	t.history = append(t.history, *p)
	return nil
}

// checkpoint saves generation t.gen every CheckpointEvery env steps, at
// the run's end, and when force is set (an interrupt) unless the newest
// checkpoint is at these env steps already.
func (t *trainer) checkpoint(force bool) error {
	cfg, p, res := t.cfg, t.p, t.res
	every := int64(cfg.CheckpointEvery)
	if every <= 0 {
		return nil
	}
	due := p.EnvSteps/every != (p.EnvSteps-t.drv.Stats().Steps)/every || p.EnvSteps >= int64(cfg.Steps) || res.Stopped
	if !due && !(force && p.EnvSteps != t.savedAt) {
		return nil
	}
	saved := cfg
	saved.Observers = nil // not checkpointed (interfaces gob cannot encode)
	ls := &loopState{Format: loopFormat, Config: saved, Progress: p, FirstSolved: res.FirstSolved, Evals: t.evals,
		Returns: t.rets, History: t.history, BestEnvSteps: res.BestEnvSteps, BestEvalReturn: res.BestEvalReturn, Stopped: res.Stopped}
	var ab bytes.Buffer
	if err := t.l.SaveState(&ab); err != nil {
		return err
	}
	ls.Agent = ab.Bytes()
	if res.Best != nil {
		var bb bytes.Buffer
		if err := res.Best.Save(&bb); err != nil {
			return err
		}
		ls.Best = bb.Bytes()
	}
	var err error
	if ls.Policy, err = t.pol.MarshalBinary(); err != nil {
		return err
	}
	if err := saveCheckpoint(cfg.CheckpointDir, t.gen, t.buf, ls, cfg.CheckpointCompress); err != nil {
		return err
	}
	if cfg.afterCheckpoint != nil {
		cfg.afterCheckpoint(t.gen, t.l.agent(), t.buf)
	}
	t.gen++
	t.savedAt = p.EnvSteps
	return nil
}

// interruptContext is a context that cannot otherwise be canceled, done
// once the interrupt channel is closed.
type interruptContext struct {
	context.Context
	interrupt <-chan struct{}
}

func (c interruptContext) Done() <-chan struct{} { return c.interrupt }

func (c interruptContext) Err() error {
	select {
	case <-c.interrupt:
		return context.Canceled
	default:
		return nil
	}
}

// finishInterrupted returns the result of a run that Interrupt ended:
// its last network and best one as they are, with a checkpoint of this
// state first when checkpoints are on and the newest is older (an
// interrupt between rounds), and no final evaluations.
func (t *trainer) finishInterrupted() (*Result, error) {
	res := t.res
	if t.p.EnvSteps > 0 && t.savedAt != t.p.EnvSteps {
		if err := t.checkpoint(true); err != nil {
			return nil, err
		}
	}
	var err error
	if res.Network, err = t.l.network(); err != nil {
		return nil, err
	}
	res.EvalReturn, res.LastEvalReturn = math.NaN(), math.NaN()
	res.Last = t.p
	res.Checkpointed = t.cfg.CheckpointEvery > 0 && t.savedAt == t.p.EnvSteps && t.p.EnvSteps > 0
	return res, nil
}

// finish evaluates the last network and the best one on the same
// environments and returns the run's result.
func (t *trainer) finish() (*Result, error) {
	res := t.res
	seed := t.evalSeed()
	q, err := t.l.evalQFunc(t.obsName)
	if err != nil {
		return nil, err
	}
	if res.LastEvalReturn, err = t.evaluate(q, seed); err != nil {
		return nil, err
	}
	if res.Network, err = t.l.network(); err != nil {
		return nil, err
	}
	if res.LastEvalReturn >= 475 && res.FirstSolved < 0 {
		res.FirstSolved = t.p.EnvSteps
	}
	res.EvalReturn = res.LastEvalReturn
	if res.Best != nil {
		if res.EvalReturn, err = t.evaluate(res.Best.QFunc(t.obsName), seed); err != nil {
			return nil, err
		}
	}
	res.Last = t.p
	res.Checkpointed = t.cfg.CheckpointEvery > 0
	return res, nil
}

// resume loads cfg.CheckpointDir's newest checkpoint: the learner state
// into l, and the replay buffer onto be (returned with its table), after
// checking that the configuration and fields match. It returns the
// generation of the next checkpoint. Its errors name the file at fault.
func resume(cfg *TrainConfig, l learner, be tensorbuf.Backend, fields []tensorbuf.Field, capacity int) (*loopState, *tensorbuf.Buffer, *tensorbuf.Table, uint64, error) {
	m, err := readManifest(cfg.CheckpointDir)
	if err != nil {
		return nil, nil, nil, 0, err
	}
	st, err := readState(cfg.CheckpointDir, m)
	if err != nil {
		return nil, nil, nil, 0, err
	}
	if err := checkResumeConfig(st.Config, *cfg); err != nil {
		return nil, nil, nil, 0, err
	}
	if err := l.LoadState(bytes.NewReader(st.Agent)); err != nil {
		return nil, nil, nil, 0, fmt.Errorf("resume: %s: %w", filepath.Join(cfg.CheckpointDir, m.State), err)
	}
	replay := filepath.Join(cfg.CheckpointDir, m.Replay)
	buf, err := tensorbuf.LoadFile(replay, tensorbuf.LoadOptions{Capacity: capacity, Backend: be})
	if err != nil {
		return nil, nil, nil, 0, fmt.Errorf("resume: %s: %w", replay, err)
	}
	table, err := buf.Table("replay")
	if err == nil && (buf.NumEnvs() != 1 || !sameFields(buf.Fields(), fields)) {
		err = fmt.Errorf("%w: the replay checkpoint holds %d rows of fields %v, want 1 of %v", ErrConfig, buf.NumEnvs(), buf.Fields(), fields)
	}
	if err != nil {
		buf.Close()
		return nil, nil, nil, 0, fmt.Errorf("resume: %s: %w", replay, err)
	}
	return st, buf, table, m.Generation + 1, nil
}

// sameFields compares fields by name, role, dtype and shape (a checkpoint
// does not keep the bounds).
func sameFields(a, b []tensorbuf.Field) bool {
	return slices.EqualFunc(a, b, func(x, y tensorbuf.Field) bool {
		return x.Name == y.Name && x.Role == y.Role && x.DType == y.DType && slices.Equal(x.Shape, y.Shape)
	})
}
