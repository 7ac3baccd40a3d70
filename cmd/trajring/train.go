//go:build !cuda

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"github.com/trajring/trajring/agents/dqn"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
)

type trainFlags struct {
	cfg      dqn.TrainConfig
	env      string
	hidden   string
	out      string
	progress time.Duration
	resume   bool
	metrics  metricsFlags
}

// newTrainCmd returns the train command.
func newTrainCmd() *cobra.Command {
	var f trainFlags
	c := &f.cfg
	cmd := &cobra.Command{
		Use:   "train",
		Short: "train DQN on CartPole-v1 from a prioritized table (gorgonia)",
		Long: `Trains DQN on CartPole-v1 from a prioritized trajring table; the defaults are RL
Baselines3 Zoo's tuned DQN settings. Writes metrics.jsonl (one line per training
round), curve.svg and the network (q.gob) to -out.

With -checkpoint-every N (env steps; 0: off) the whole run is checkpointed
into -out every N env steps and at the end: the replay buffer and its table
(replay-NNNNNN.ckpt, readable with trajring inspect), the learner state
(state-NNNNNN.gob: networks, Adam, counters, schedules, random sources,
metrics history) and checkpoint.json, written last, naming both; a crash
at any moment leaves the previous checkpoint whole. -resume continues from
-out's newest checkpoint with its configuration; flags given explicitly
override it (-steps extends the run; flags that change the learner are
refused). The environment is reset on resume: the episode in flight at the
checkpoint is cut, and metrics.jsonl is rewritten up to the checkpoint.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if f.resume {
				if err := f.resumeConfig(cmd); err != nil {
					return err
				}
			}
			if err := f.validate(); err != nil {
				return err
			}
			return runTrain(f, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	fs := cmd.Flags()
	fs.SortFlags = false
	fs.StringVar(&f.env, "env", "CartPole-v1", "environment (only CartPole-v1)")
	fs.IntVar(&c.Steps, "steps", 50_000, "env steps")
	fs.StringVar(&f.hidden, "hidden", "256,256", "hidden layer sizes")
	fs.Float64Var(&c.Agent.LearningRate, "lr", 2.3e-3, "Adam learning rate")
	fs.IntVar(&c.Agent.BatchSize, "batch", 64, "batch size")
	fs.IntVar(&c.BufferSize, "buffer", 100_000, "replay capacity (transitions)")
	fs.IntVar(&c.LearningStarts, "learning-starts", 1_000, "env steps before training")
	fs.Float64Var(&c.Gamma, "gamma", 0.99, "discount factor")
	fs.IntVar(&c.NStep, "n-step", 1, "n of n-step targets (items of n+1 steps)")
	fs.IntVar(&c.TargetUpdateInterval, "target-update", 10, "target network update interval (env steps)")
	fs.IntVar(&c.TrainFreq, "train-freq", 256, "env steps between training rounds")
	fs.IntVar(&c.GradientSteps, "gradient-steps", 128, "gradient steps per training round")
	fs.Float64Var(&c.ExplorationFraction, "exploration-fraction", 0.16, "fraction of the steps over which epsilon decays")
	fs.Float64Var(&c.ExplorationFinalEps, "exploration-final-eps", 0.04, "final epsilon")
	fs.BoolVar(&c.Prioritized, "per", true, "prioritized replay (false: uniform, as SB3's DQN)")
	fs.Float64Var(&c.Alpha, "alpha", 0.6, "priority exponent")
	fs.Float64Var(&c.Beta, "beta", 0.4, "initial importance-weight exponent (annealed to 1)")
	fs.BoolVar(&c.Agent.DoubleDQN, "double", true, "double DQN targets")
	fs.Float64Var(&c.Agent.MaxGradNorm, "max-grad-norm", 10, "global gradient norm clip (negative: none)")
	fs.IntVar(&c.EvalEpisodes, "eval-episodes", 100, "greedy episodes of the final evaluation")
	fs.IntVar(&c.EvalEvery, "eval-every", 5_000, "env steps between greedy evaluations (0: none)")
	fs.Uint64Var(&c.Seed, "seed", 1, "seed")
	fs.StringVar(&f.out, "out", "trajring-train", "directory for metrics.jsonl, curve.svg, q.gob and checkpoints")
	fs.IntVar(&c.CheckpointEvery, "checkpoint-every", 10_000, "env steps between checkpoints into -out (0: none)")
	fs.BoolVar(&f.resume, "resume", false, "continue from the newest checkpoint in -out")
	fs.DurationVar(&f.progress, "progress", 5*time.Second, "progress on stderr: a bar on a terminal, else a line at this interval (0: none)")
	f.metrics.register(fs)
	return cmd
}

// validate checks the flags that the command itself interprets; the
// training configuration is checked by dqn.RunCartPole.
func (f *trainFlags) validate() error {
	if f.env != "CartPole-v1" {
		return usageErrorf("-env: unknown environment %q (only CartPole-v1)", f.env)
	}
	if f.cfg.Steps <= 0 {
		return usageErrorf("-steps must be positive, got %d", f.cfg.Steps)
	}
	if f.progress < 0 {
		return usageErrorf("-progress must not be negative, got %v", f.progress)
	}
	if err := f.metrics.validate(int64(f.cfg.Steps)); err != nil {
		return err
	}
	if f.cfg.CheckpointEvery < 0 {
		return usageErrorf("-checkpoint-every must not be negative, got %d", f.cfg.CheckpointEvery)
	}
	f.cfg.CheckpointDir, f.cfg.Resume = "", f.resume
	if f.cfg.CheckpointEvery > 0 || f.resume {
		f.cfg.CheckpointDir = f.out
	}
	f.cfg.Agent.Hidden = nil
	for _, s := range strings.Split(f.hidden, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 1 {
			return usageErrorf("-hidden: bad layer size %q in %q (want positive integers separated by commas)", s, f.hidden)
		}
		f.cfg.Agent.Hidden = append(f.cfg.Agent.Hidden, n)
	}
	return nil
}

// resumeConfig replaces the training configuration by the checkpoint's
// in -out, then applies the flags given explicitly on top of it.
func (f *trainFlags) resumeConfig(cmd *cobra.Command) error {
	ck, err := dqn.ReadCheckpoint(f.out)
	if err != nil {
		return &runError{err}
	}
	changed := map[string]string{}
	fs := cmd.Flags()
	fs.Visit(func(fl *pflag.Flag) { changed[fl.Name] = fl.Value.String() })
	f.cfg = ck.Config // the flags point into f.cfg: they now read the saved values
	hidden := make([]string, len(ck.Config.Agent.Hidden))
	for i, h := range ck.Config.Agent.Hidden {
		hidden[i] = strconv.Itoa(h)
	}
	f.hidden = strings.Join(hidden, ",")
	for name, v := range changed {
		if err := fs.Set(name, v); err != nil {
			return usageErrorf("-%s: %v", name, err)
		}
	}
	return nil
}

// runTrain trains, with progress on stderr, and writes the outputs.
func runTrain(f trainFlags, stdout, stderr io.Writer) error {
	if err := os.MkdirAll(f.out, 0o755); err != nil {
		return err
	}
	// metrics.jsonl is (re)written from the first round, or on resume from
	// the history up to the checkpoint: a resume that fails early leaves
	// the old file alone.
	var mf *os.File
	var enc *json.Encoder
	var curve, evals plotter.XYs
	var encErr error
	defer func() {
		if mf != nil {
			mf.Close()
		}
	}()
	prog := newProgress(stderr, "train", "env steps", int64(f.cfg.Steps), f.progress)
	record := func(p dqn.Progress) {
		if mf == nil && encErr == nil {
			if mf, encErr = os.Create(filepath.Join(f.out, "metrics.jsonl")); encErr == nil {
				enc = json.NewEncoder(mf)
			}
		}
		if enc != nil {
			if err := enc.Encode(p); err != nil && encErr == nil {
				encErr = err
			}
		}
		curve = append(curve, plotter.XY{X: float64(p.EnvSteps), Y: p.TrainReturn})
		if p.EvalReturn >= 0 {
			evals = append(evals, plotter.XY{X: float64(p.EnvSteps), Y: p.EvalReturn})
		}
	}
	f.cfg.OnResume = func(history []dqn.Progress) {
		at := int64(0)
		for _, p := range history {
			record(p)
			at = p.EnvSteps
		}
		fmt.Fprintf(stdout, "resumed from the checkpoint in %s at %d env steps\n", f.out, at)
	}
	f.cfg.Progress = func(p dqn.Progress) {
		record(p)
		prog.set(p.EnvSteps, trainDetail(p))
		if p.EvalReturn >= 0 && f.progress > 0 {
			prog.println(fmt.Sprintf("train: greedy evaluation at %d env steps: %.1f", p.EnvSteps, p.EvalReturn))
		}
	}
	// -metrics records the collection of this run (from its start, or from
	// the resume) through an observer.MetricsLog on the collection driver.
	mlog, mfile, err := f.metrics.open(1, stderr)
	if err != nil {
		return err
	}
	if mfile != nil {
		defer mfile.Close() // on the error paths; closed and checked below
		f.cfg.Observers = append(f.cfg.Observers, mlog)
	}
	res, err := dqn.RunCartPole(context.Background(), f.cfg)
	prog.finish("")
	if err != nil {
		return err
	}
	if err := finishMetrics(mlog, mfile); err != nil {
		return err
	}
	if encErr != nil {
		return fmt.Errorf("writing metrics: %w", encErr)
	}
	qf, err := os.Create(filepath.Join(f.out, "q.gob"))
	if err != nil {
		return err
	}
	if err := res.Agent.Save(qf); err != nil {
		qf.Close()
		return err
	}
	if err := qf.Close(); err != nil {
		return err
	}
	if err := plotCurve(filepath.Join(f.out, "curve.svg"), curve, evals, res.EvalReturn, res.Last.EnvSteps); err != nil {
		return err
	}
	l := res.Last
	learner := l.SampleSeconds + l.TrainSeconds
	fmt.Fprintf(stdout, "env steps %d, gradient steps %d, episodes %d in %.1fs (collect %.1fs, learner %.1fs)\n",
		l.EnvSteps, l.GradientSteps, l.Episodes, l.Elapsed, l.CollectSecs, learner)
	if learner > 0 {
		fmt.Fprintf(stdout, "learner: %.0f gradient steps/s; sampling + priority updates %.2f%% of learner time; %.1f%% of sampled windows valid\n",
			float64(l.GradientSteps)/learner, 100*l.SampleSeconds/learner, 100*l.ValidFraction)
	}
	if res.FirstSolved >= 0 {
		fmt.Fprintf(stdout, "first greedy evaluation >= 475 at %d env steps\n", res.FirstSolved)
	}
	fmt.Fprintf(stdout, "wrote %s\n", strings.Join([]string{
		filepath.Join(f.out, "metrics.jsonl"), filepath.Join(f.out, "curve.svg"), filepath.Join(f.out, "q.gob")}, ", "))
	if f.cfg.CheckpointEvery > 0 {
		fmt.Fprintf(stdout, "checkpoint: %s (resume with -resume -out %s)\n", filepath.Join(f.out, dqn.ManifestFile), f.out)
	}
	fmt.Fprintf(stdout, "mean return over %d greedy episodes: %.1f\n", f.cfg.EvalEpisodes, res.EvalReturn)
	return nil
}

// trainDetail is the state of training shown next to the progress.
func trainDetail(p dqn.Progress) string {
	return fmt.Sprintf("eps %.3f, loss %.4f, return(100) %.1f", p.Epsilon, p.Loss, p.TrainReturn)
}

func plotCurve(path string, train, evals plotter.XYs, final float64, steps int64) error {
	p := plot.New()
	p.Title.Text = "DQN on CartPole-v1 (trajring + gorgonia)"
	p.X.Label.Text = "env steps"
	p.Y.Label.Text = "episode return"
	p.Y.Min, p.Y.Max = 0, 520
	p.Legend.Top, p.Legend.Left = true, true
	vs := []any{"training (mean of last 100 episodes)", train}
	if len(evals) > 0 {
		vs = append(vs, "greedy evaluation", evals)
	}
	vs = append(vs, "final greedy evaluation", plotter.XYs{{X: float64(steps), Y: final}})
	if err := plotutil.AddLinePoints(p, vs...); err != nil {
		return err
	}
	return p.Save(7*vg.Inch, 4.5*vg.Inch, path)
}
