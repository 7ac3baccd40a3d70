//go:build !cuda

package dqn

import (
	"context"
	"fmt"
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
		!(c.Alpha > 0) || !(c.Beta >= 0 && c.Beta <= 1) {
		return fmt.Errorf("%w: %+v", ErrConfig, *c)
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
	agent, err := New(cfg.Agent)
	if err != nil {
		return nil, err
	}
	fields := append(append([]tensorbuf.Field(nil), env.ObservationSpec()...), env.ActionSpec()...)
	buf, err := tensorbuf.New(tensorbuf.Config{NumEnvs: 1, Capacity: cfg.BufferSize + cfg.NStep + 1, Fields: fields, Seed: cfg.Seed})
	if err != nil {
		return nil, err
	}
	defer buf.Close()
	tc := tensorbuf.TableConfig{Name: "replay", Selector: tensorbuf.Uniform, MaxSize: cfg.BufferSize, Seed: cfg.Seed}
	if cfg.Prioritized {
		tc.Selector, tc.PriorityExponent, tc.Beta = tensorbuf.Prioritized, cfg.Alpha, cfg.Beta
	}
	table, err := buf.NewTable(tc)
	if err != nil {
		return nil, err
	}
	obs, err := observer.NewAddTrajectory(buf, observer.AddTrajectoryConfig{
		Tables:           []observer.TableSequence{{Table: "replay", SequenceLength: cfg.NStep + 1}},
		PadEndOfEpisodes: cfg.NStep > 1, TileEndOfEpisodes: cfg.NStep > 1,
	})
	if err != nil {
		return nil, err
	}
	defer obs.Close()
	rets, err := observer.NewAverageReturn(1, 100)
	if err != nil {
		return nil, err
	}
	sched := driver.LinearSchedule{Start: 1, End: cfg.ExplorationFinalEps, Steps: int64(cfg.ExplorationFraction * float64(cfg.Steps))}
	pol, err := driver.NewEpsilonGreedyPolicy(actName, env.ActionSpec()[0].DType, cfg.Agent.NumActions, agent.QFunc(obsName), sched, cfg.Seed)
	if err != nil {
		return nil, err
	}
	drv, err := driver.NewStepDriver(env, pol, cfg.TrainFreq, driver.WithObservers(obs, rets))
	if err != nil {
		return nil, err
	}
	evalEnv, err := envs.NewCartPole(cfg.EvalEpisodes, cfg.Seed+1_000_003)
	if err != nil {
		return nil, err
	}
	res := &Result{Agent: agent, FirstSolved: -1}
	tr := new(tensorbuf.TableTransitions)
	defer tr.Release()
	batch := agent.NewBatch()
	prio := make([]float32, agent.cfg.BatchSize)
	nopt := tensorbuf.NStepOptions{Horizon: cfg.NStep, DiscountFactor: cfg.Gamma}
	var p Progress
	var ts *driver.TimeStep
	var state any
	lastTarget := int64(0)
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
		p.TrainReturn = float64(rets.Result())
		p.Epsilon = pol.Epsilon()
		p.EvalReturn = -1
		if cfg.EvalEvery > 0 && p.EnvSteps/int64(cfg.EvalEvery) != (p.EnvSteps-int64(drv.Stats().Steps))/int64(cfg.EvalEvery) {
			if p.EvalReturn, err = Evaluate(agent, evalEnv, obsName, actName); err != nil {
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
	}
	if res.EvalReturn, err = Evaluate(agent, evalEnv, obsName, actName); err != nil {
		return nil, err
	}
	if res.EvalReturn >= 475 && res.FirstSolved < 0 {
		res.FirstSolved = p.EnvSteps
	}
	res.Last = p
	return res, nil
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
