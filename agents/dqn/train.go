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
	ValidFraction float64  `json:"valid_fraction"` // of sampled transitions
}

// Result is what RunCartPole returns. As RL Zoo's EvalCallback does, a
// run keeps the network of its best evaluation besides the last one: DQN
// on CartPole can lose a solved policy within a few thousand steps, and
// the network a user is handed should be the best one found.
type Result struct {
	// Agent holds the last network; Last is the last round's Progress.
	Agent *Agent
	Last  Progress
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
	res := &Result{Agent: agent, FirstSolved: -1, BestEnvSteps: -1}
	var p Progress
	var history []Progress
	var evals int64
	if st != nil {
		if err := pol.UnmarshalBinary(st.Policy); err != nil {
			return nil, fmt.Errorf("resume: %w", err)
		}
		if st.Best != nil {
			if res.Best, err = ReadNetwork(bytes.NewReader(st.Best)); err != nil {
				return nil, fmt.Errorf("resume: best network: %w", err)
			}
			res.BestEnvSteps, res.BestEvalReturn = st.BestEnvSteps, st.BestEvalReturn
		}
		rets = st.Returns
		clear(rets.Acc) // the episodes in flight are cut
		p, history, res.FirstSolved, evals, res.Stopped = st.Progress, st.History, st.FirstSolved, st.Evals, st.Stopped
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
	// uninterrupted one would have; the final evaluations of the best and
	// the last network share one.
	evalSeed := func() uint64 { evals++; return cfg.Seed + 1_000_003 + uint64(evals-1)*0x9e3779b97f4a7c15 }
	evaluate := func(q driver.QFunc, seed uint64) (float64, error) {
		evalEnv, err := envs.NewCartPole(cfg.EvalEpisodes, seed)
		if err != nil {
			return 0, err
		}
		rets, err := GreedyReturns(q, cfg.Agent.NumActions, evalEnv, obsName, actName)
		if err != nil {
			return 0, err
		}
		return mean(rets), nil
	}
	tr := new(tensorbuf.TableTransitions)
	defer tr.Release()
	batch := agent.NewBatch()
	prio := make([]float32, agent.cfg.BatchSize)
	nopt := tensorbuf.NStepOptions{Horizon: cfg.NStep, DiscountFactor: cfg.Gamma}
	var ts *driver.TimeStep
	var state any
	lastTarget := p.EnvSteps
	// A run that stopped on StopOnReturn is complete, as one that
	// reached Steps: its resume only evaluates.
	for p.EnvSteps < int64(cfg.Steps) && !res.Stopped {
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
		// The learning rate of this round, linear in the env steps over
		// the run (RL Zoo's lin_ schedules are linear in SB3's progress).
		frac := min(float64(p.EnvSteps)/float64(cfg.Steps), 1)
		if err := agent.SetLearningRate(cfg.Agent.LearningRate + (cfg.LearningRateEnd-cfg.Agent.LearningRate)*frac); err != nil {
			return nil, err
		}
		p.LearningRate = agent.LearningRate()
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
		p.EvalReturn = nil
		if cfg.EvalEvery > 0 && p.EnvSteps/int64(cfg.EvalEvery) != (p.EnvSteps-int64(drv.Stats().Steps))/int64(cfg.EvalEvery) {
			ret, err := evaluate(agent.QFunc(obsName), evalSeed())
			if err != nil {
				return nil, err
			}
			p.EvalReturn = &ret
			if ret >= 475 && res.FirstSolved < 0 {
				res.FirstSolved = p.EnvSteps
			}
			if res.Best == nil || ret > res.BestEvalReturn {
				res.Best, res.BestEnvSteps, res.BestEvalReturn = agent.Network(), p.EnvSteps, ret
			}
			res.Stopped = cfg.StopOnReturn > 0 && ret >= cfg.StopOnReturn
		}
		p.Elapsed = time.Since(start).Seconds()
		if cfg.Progress != nil {
			cfg.Progress(p)
		}
		history = append(history, p)
		every := int64(cfg.CheckpointEvery)
		if every > 0 && (p.EnvSteps/every != (p.EnvSteps-drv.Stats().Steps)/every || p.EnvSteps >= int64(cfg.Steps) || res.Stopped) {
			saved := cfg
			saved.Observers = nil // not checkpointed (interfaces gob cannot encode)
			ls := &loopState{Format: loopFormat, Config: saved, Progress: p, FirstSolved: res.FirstSolved, Evals: evals,
				Returns: rets, History: history, BestEnvSteps: res.BestEnvSteps, BestEvalReturn: res.BestEvalReturn, Stopped: res.Stopped}
			var ab bytes.Buffer
			if err := agent.SaveState(&ab); err != nil {
				return nil, err
			}
			ls.Agent = ab.Bytes()
			if res.Best != nil {
				var bb bytes.Buffer
				if err := res.Best.Save(&bb); err != nil {
					return nil, err
				}
				ls.Best = bb.Bytes()
			}
			if ls.Policy, err = pol.MarshalBinary(); err != nil {
				return nil, err
			}
			if err := saveCheckpoint(cfg.CheckpointDir, gen, buf, ls, cfg.CheckpointCompress); err != nil {
				return nil, err
			}
			if cfg.afterCheckpoint != nil {
				cfg.afterCheckpoint(gen, agent, buf)
			}
			gen++
		}
	}
	seed := evalSeed()
	if res.LastEvalReturn, err = evaluate(agent.QFunc(obsName), seed); err != nil {
		return nil, err
	}
	if res.LastEvalReturn >= 475 && res.FirstSolved < 0 {
		res.FirstSolved = p.EnvSteps
	}
	res.EvalReturn = res.LastEvalReturn
	if res.Best != nil {
		if res.EvalReturn, err = evaluate(res.Best.QFunc(obsName), seed); err != nil {
			return nil, err
		}
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
