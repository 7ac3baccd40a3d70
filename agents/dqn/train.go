//go:build !cuda

package dqn

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"time"

	"github.com/trajring/trajring/driver"
	"github.com/trajring/trajring/driver/envs"
	"github.com/trajring/trajring/observer"
	"github.com/trajring/trajring/tensorbuf"
)

// TrainConfig configures RunCartPole. Zero values take RL Baselines3
// Zoo's tuned DQN settings for CartPole-v1 (hyperparams/dqn.yml).
type TrainConfig struct {
	Agent Config // Hidden 256x256, lr 2.3e-3, batch 64 by default
	// Steps is the number of env steps (0: 50,000).
	Steps int
	// BufferSize is the replay capacity in transitions (0: 100,000).
	BufferSize int
	// LearningStarts is the env steps collected before training (0: 1,000).
	LearningStarts int
	// Gamma is the discount factor (0: 0.99).
	Gamma float64
	// NStep is the n of n-step targets (0: 1).
	NStep int
	// TargetUpdateInterval is in env steps, as in SB3 (0: 10).
	TargetUpdateInterval int
	// TrainFreq env steps are collected between training rounds of
	// GradientSteps gradient steps (0: 256 and 128).
	TrainFreq, GradientSteps int
	// ExplorationFraction of Steps takes epsilon from 1 to
	// ExplorationFinalEps (0: 0.16 and 0.04).
	ExplorationFraction, ExplorationFinalEps float64
	// Prioritized samples from a prioritized table (priority exponent
	// Alpha, importance-weight exponent Beta annealed to 1 over the run);
	// otherwise uniformly as SB3's DQN does.
	Prioritized bool
	Alpha, Beta float64
	// EvalEpisodes greedy episodes are run at the end (0: 100) and every
	// EvalEvery env steps (0: never) on their own environments.
	EvalEpisodes, EvalEvery int
	// Seed seeds the environments, exploration, table and weights.
	Seed uint64
	// Progress, when set, is called after every training round and
	// evaluation.
	Progress func(Progress)

	// CheckpointDir with CheckpointEvery > 0 checkpoints the whole run
	// (replay buffer and table, networks, Adam, counters, epsilon and beta
	// schedule positions, random sources, training-return window and the
	// Progress history) into CheckpointDir at the end of the first
	// training round that reaches every multiple of CheckpointEvery env
	// steps, and at the end of the run; see ManifestFile for the files
	// and why a crash never leaves a torn checkpoint.
	CheckpointDir   string
	CheckpointEvery int
	// Resume continues the run checkpointed in CheckpointDir (ErrNoCheckpoint
	// when there is none). The configuration must equal the checkpoint's
	// (ErrConfig names the fields that differ) except for Steps (a larger
	// value extends the run; the epsilon and beta schedules, which are
	// fractions of Steps, stretch with it), the evaluation settings, the
	// callbacks and the checkpoint settings.
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
	// Observers are further observers of the collection driver (an
	// observer.MetricsLog, say), called after the replay observer on every
	// collected step. They are not checkpointed, and a resume may pass
	// others.
	Observers []driver.Observer

	// tests: called after each checkpoint, and after a resume loaded one
	afterCheckpoint func(gen uint64, a *Agent, buf *tensorbuf.Buffer)
	afterResume     func(a *Agent, buf *tensorbuf.Buffer)
}

func (c *TrainConfig) defaults() error {
	set := func(p *int, v int) {
		if *p == 0 {
			*p = v
		}
	}
	set(&c.Steps, 50_000)
	set(&c.BufferSize, 100_000)
	set(&c.LearningStarts, 1_000)
	set(&c.NStep, 1)
	set(&c.TargetUpdateInterval, 10)
	set(&c.TrainFreq, 256)
	set(&c.GradientSteps, 128)
	set(&c.EvalEpisodes, 100)
	if c.Gamma == 0 {
		c.Gamma = 0.99
	}
	if c.ExplorationFraction == 0 {
		c.ExplorationFraction = 0.16
	}
	if c.ExplorationFinalEps == 0 {
		c.ExplorationFinalEps = 0.04
	}
	if c.Alpha == 0 {
		c.Alpha = 0.6
	}
	if c.Beta == 0 {
		c.Beta = 0.4
	}
	if c.Steps < 1 || c.BufferSize < 2 || c.LearningStarts < 0 || c.NStep < 1 || c.TargetUpdateInterval < 1 || c.TrainFreq < 1 ||
		c.GradientSteps < 0 || c.EvalEpisodes < 1 || c.EvalEvery < 0 || !(c.Gamma >= 0 && c.Gamma <= 1) ||
		!(c.ExplorationFraction >= 0 && c.ExplorationFraction <= 1) || !(c.ExplorationFinalEps >= 0 && c.ExplorationFinalEps <= 1) ||
		!(c.Alpha > 0) || !(c.Beta >= 0 && c.Beta <= 1) || c.CheckpointEvery < 0 {
		return fmt.Errorf("%w: %+v", ErrConfig, *c)
	}
	if (c.CheckpointEvery > 0 || c.Resume) && c.CheckpointDir == "" {
		return fmt.Errorf("%w: checkpoints and resume need a CheckpointDir", ErrConfig)
	}
	return nil
}

// Progress is a snapshot of a run, passed to TrainConfig.Progress.
type Progress struct {
	EnvSteps      int64   `json:"env_steps"`
	GradientSteps int64   `json:"gradient_steps"`
	Episodes      int64   `json:"episodes"`
	Epsilon       float64 `json:"epsilon"`
	Loss          float64 `json:"loss"`           // mean over the last round
	TrainReturn   float64 `json:"train_return"`   // mean of the last 100 training episodes
	EvalReturn    float64 `json:"eval_return"`    // set on evaluations, else -1
	Elapsed       float64 `json:"elapsed_s"`      // since the start
	SampleSeconds float64 `json:"sample_s"`       // learner time sampling and updating priorities
	TrainSeconds  float64 `json:"train_s"`        // learner time in the gradient steps
	CollectSecs   float64 `json:"collect_s"`      // time collecting env steps
	ValidFraction float64 `json:"valid_fraction"` // of sampled transitions
}

// Result is what RunCartPole returns.
type Result struct {
	Agent *Agent
	Last  Progress
	// EvalReturn is the mean return of EvalEpisodes greedy episodes after
	// training; FirstSolved the env steps at the first evaluation reaching
	// 475 (-1 if none did).
	EvalReturn  float64
	FirstSolved int64
}

// RunCartPole trains a DQN agent on CartPole-v1 (one environment, as RL
// Zoo does) through trajring: an AddTrajectory observer writes windows of
// NStep+1 steps into a table, and every training round samples them as
// transitions (Table.SampleTransitionsInto), trains and, with
// Prioritized, updates priorities from the TD errors. It is not safe for
// concurrent use of one TrainConfig's Progress.
func RunCartPole(ctx context.Context, cfg TrainConfig) (*Result, error) {
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	start := time.Now()
	env, err := envs.NewCartPole(1, cfg.Seed)
	if err != nil {
		return nil, err
	}
	obsName, actName := env.ObservationSpec()[0].Name, env.ActionSpec()[0].Name
	cfg.Agent.ObsDim = env.ObservationSpec()[0].Elems()
	cfg.Agent.NumActions = int(env.ActionSpec()[0].Max[0]) + 1
	if cfg.Agent.Seed == 0 {
		cfg.Agent.Seed = cfg.Seed
	}
	if err := cfg.Agent.defaults(); err != nil {
		return nil, err
	}
	agent, err := New(cfg.Agent)
	if err != nil {
		return nil, err
	}
	fields := append(append([]tensorbuf.Field(nil), env.ObservationSpec()...), env.ActionSpec()...)
	capacity := cfg.BufferSize + cfg.NStep + 1
	var (
		buf   *tensorbuf.Buffer
		table *tensorbuf.Table
		st    *loopState // the checkpoint resumed from
		gen   uint64     // of the next checkpoint
	)
	if cfg.Resume {
		if st, buf, table, gen, err = resume(&cfg, agent, fields, capacity); err != nil {
			return nil, err
		}
		// A fresh start for the environment (see TrainConfig.Resume).
		if env, err = envs.NewCartPole(1, cfg.Seed^uint64(st.Progress.EnvSteps)*0x9e3779b97f4a7c15); err != nil {
			buf.Close()
			return nil, err
		}
	} else {
		if buf, err = tensorbuf.New(tensorbuf.Config{NumEnvs: 1, Capacity: capacity, Fields: fields, Seed: cfg.Seed}); err != nil {
			return nil, err
		}
		tc := tensorbuf.TableConfig{Name: "replay", Selector: tensorbuf.Uniform, MaxSize: cfg.BufferSize, Seed: cfg.Seed}
		if cfg.Prioritized {
			tc.Selector, tc.PriorityExponent, tc.Beta = tensorbuf.Prioritized, cfg.Alpha, cfg.Beta
		}
		if table, err = buf.NewTable(tc); err != nil {
			buf.Close()
			return nil, err
		}
		if cfg.CheckpointEvery > 0 {
			gen = nextGeneration(cfg.CheckpointDir)
		}
	}
	defer buf.Close()
	obs, err := observer.NewAddTrajectory(buf, observer.AddTrajectoryConfig{
		Tables:           []observer.TableSequence{{Table: "replay", SequenceLength: cfg.NStep + 1}},
		PadEndOfEpisodes: cfg.NStep > 1, TileEndOfEpisodes: cfg.NStep > 1,
	})
	if err != nil {
		return nil, err
	}
	defer obs.Close()
	rets := newReturnWindow(1, 100)
	sched := driver.LinearSchedule{Start: 1, End: cfg.ExplorationFinalEps, Steps: int64(cfg.ExplorationFraction * float64(cfg.Steps))}
	pol, err := driver.NewEpsilonGreedyPolicy(actName, env.ActionSpec()[0].DType, cfg.Agent.NumActions, agent.QFunc(obsName), sched, cfg.Seed)
	if err != nil {
		return nil, err
	}
	res := &Result{Agent: agent, FirstSolved: -1}
	var p Progress
	var history []Progress
	var evals int64
	if st != nil {
		if err := pol.UnmarshalBinary(st.Policy); err != nil {
			return nil, fmt.Errorf("resume: %w", err)
		}
		rets = st.Returns
		clear(rets.Acc) // the episodes in flight are cut
		p, history, res.FirstSolved, evals = st.Progress, st.History, st.FirstSolved, st.Evals
		start = start.Add(-time.Duration(p.Elapsed * float64(time.Second)))
		if cfg.OnResume != nil {
			cfg.OnResume(slices.Clone(history))
		}
		if cfg.afterResume != nil {
			cfg.afterResume(agent, buf)
		}
	}
	drv, err := driver.NewStepDriver(env, pol, cfg.TrainFreq, driver.WithObservers(append([]driver.Observer{obs, &rets}, cfg.Observers...)...))
	if err != nil {
		return nil, err
	}
	// Every evaluation runs on environments of its own seed (the first
	// one's is Seed+1_000_003), so that a resumed run evaluates as the
	// uninterrupted one would have.
	evaluate := func() (float64, error) {
		evalEnv, err := envs.NewCartPole(cfg.EvalEpisodes, cfg.Seed+1_000_003+uint64(evals)*0x9e3779b97f4a7c15)
		if err != nil {
			return 0, err
		}
		evals++
		return Evaluate(agent, evalEnv, obsName, actName)
	}
	tr := new(tensorbuf.TableTransitions)
	defer tr.Release()
	batch := agent.NewBatch()
	prio := make([]float32, agent.cfg.BatchSize)
	nopt := tensorbuf.NStepOptions{Horizon: cfg.NStep, DiscountFactor: cfg.Gamma}
	var ts *driver.TimeStep
	var state any
	lastTarget := p.EnvSteps
	for p.EnvSteps < int64(cfg.Steps) {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		t0 := time.Now()
		drv.SetNumSteps(min(cfg.TrainFreq, cfg.Steps-int(p.EnvSteps)))
		if ts, state, err = drv.Run(ctx, ts, state); err != nil {
			return nil, err
		}
		p.CollectSecs += time.Since(t0).Seconds()
		p.EnvSteps += drv.Stats().Steps
		p.Episodes += drv.Stats().Episodes
		pol.SetSteps(p.EnvSteps) // the policy's clock also counted boundary steps
		if p.EnvSteps/int64(cfg.TargetUpdateInterval) != lastTarget/int64(cfg.TargetUpdateInterval) {
			agent.UpdateTarget()
		}
		lastTarget = p.EnvSteps
		p.Loss = 0
		if p.EnvSteps > int64(cfg.LearningStarts) && cfg.GradientSteps > 0 {
			if cfg.Prioritized {
				beta := cfg.Beta + (1-cfg.Beta)*float64(p.EnvSteps)/float64(cfg.Steps)
				if err := table.SetBeta(min(beta, 1)); err != nil {
					return nil, err
				}
			}
			valid, total := 0, 0
			for range cfg.GradientSteps {
				t1 := time.Now()
				if err := table.SampleTransitionsInto(ctx, tr, agent.cfg.BatchSize, nopt); err != nil {
					return nil, err
				}
				if err := agent.FromTransitions(batch, tr, obsName, actName); err != nil {
					return nil, err
				}
				t2 := time.Now()
				loss, err := agent.Train(batch)
				if err != nil {
					return nil, err
				}
				t3 := time.Now()
				if cfg.Prioritized {
					agent.Priorities(batch, prio)
					if err := table.UpdatePriorities32(tr.Keys, prio); err != nil {
						return nil, err
					}
				}
				for _, v := range tr.Valid {
					if v {
						valid++
					}
				}
				total += len(tr.Valid)
				p.SampleSeconds += t2.Sub(t1).Seconds() + time.Since(t3).Seconds()
				p.TrainSeconds += t3.Sub(t2).Seconds()
				p.Loss += loss / float64(cfg.GradientSteps)
			}
			p.ValidFraction = float64(valid) / float64(total)
		}
		p.GradientSteps = agent.Steps()
		p.TrainReturn = rets.Result()
		p.Epsilon = pol.Epsilon()
		p.EvalReturn = -1
		if cfg.EvalEvery > 0 && p.EnvSteps/int64(cfg.EvalEvery) != (p.EnvSteps-int64(drv.Stats().Steps))/int64(cfg.EvalEvery) {
			if p.EvalReturn, err = evaluate(); err != nil {
				return nil, err
			}
			if p.EvalReturn >= 475 && res.FirstSolved < 0 {
				res.FirstSolved = p.EnvSteps
			}
		}
		p.Elapsed = time.Since(start).Seconds()
		if cfg.Progress != nil {
			cfg.Progress(p)
		}
		history = append(history, p)
		every := int64(cfg.CheckpointEvery)
		if every > 0 && (p.EnvSteps/every != (p.EnvSteps-drv.Stats().Steps)/every || p.EnvSteps >= int64(cfg.Steps)) {
			saved := cfg
			saved.Observers = nil // not checkpointed (interfaces gob cannot encode)
			ls := &loopState{Format: loopFormat, Config: saved, Progress: p, FirstSolved: res.FirstSolved, Evals: evals,
				Returns: rets, History: history}
			var ab bytes.Buffer
			if err := agent.SaveState(&ab); err != nil {
				return nil, err
			}
			ls.Agent = ab.Bytes()
			if ls.Policy, err = pol.MarshalBinary(); err != nil {
				return nil, err
			}
			if err := saveCheckpoint(cfg.CheckpointDir, gen, buf, ls); err != nil {
				return nil, err
			}
			if cfg.afterCheckpoint != nil {
				cfg.afterCheckpoint(gen, agent, buf)
			}
			gen++
		}
	}
	if res.EvalReturn, err = evaluate(); err != nil {
		return nil, err
	}
	if res.EvalReturn >= 475 && res.FirstSolved < 0 {
		res.FirstSolved = p.EnvSteps
	}
	res.Last = p
	return res, nil
}

// resume loads cfg.CheckpointDir's newest checkpoint: the learner state
// into agent, and the replay buffer (returned with its table), after
// checking that the configuration and fields match. It returns the
// generation of the next checkpoint.
func resume(cfg *TrainConfig, agent *Agent, fields []tensorbuf.Field, capacity int) (*loopState, *tensorbuf.Buffer, *tensorbuf.Table, uint64, error) {
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
	if err := agent.LoadState(bytes.NewReader(st.Agent)); err != nil {
		return nil, nil, nil, 0, fmt.Errorf("resume: %w", err)
	}
	buf, err := tensorbuf.LoadFile(filepath.Join(cfg.CheckpointDir, m.Replay), tensorbuf.LoadOptions{Capacity: capacity})
	if err != nil {
		return nil, nil, nil, 0, fmt.Errorf("resume: %w", err)
	}
	table, err := buf.Table("replay")
	if err == nil && (buf.NumEnvs() != 1 || !sameFields(buf.Fields(), fields)) {
		err = fmt.Errorf("%w: the replay checkpoint holds %d rows of fields %v, want 1 of %v", ErrConfig, buf.NumEnvs(), buf.Fields(), fields)
	}
	if err != nil {
		buf.Close()
		return nil, nil, nil, 0, fmt.Errorf("resume: %w", err)
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

// Evaluate runs one greedy episode on every row of env (from a reset)
// and returns the mean undiscounted return.
func Evaluate(agent *Agent, env *envs.CartPole, obsName, actName string) (float64, error) {
	pol, err := driver.NewGreedyPolicy(actName, env.ActionSpec()[0].DType, agent.cfg.NumActions, agent.QFunc(obsName))
	if err != nil {
		return 0, err
	}
	ts, err := env.Reset()
	if err != nil {
		return 0, err
	}
	n := env.BatchSize()
	done := make([]bool, n)
	left := n
	var total float64
	for left > 0 {
		ps, err := pol.Action(ts, nil)
		if err != nil {
			return 0, err
		}
		if ts, err = env.Step(ps.Action); err != nil {
			return 0, err
		}
		for r := range n {
			if done[r] {
				continue
			}
			total += float64(ts.Reward[r])
			if ts.StepType[r] == tensorbuf.Last {
				done[r] = true
				left--
			}
		}
	}
	return total / float64(n), nil
}
