package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"github.com/trajring/trajring/agents/dqn"
	"github.com/trajring/trajring/internal/atomicfile"
	"github.com/trajring/trajring/internal/figure"
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
	d := dqn.DefaultTrainConfig()
	cmd := &cobra.Command{
		Use:   "train",
		Short: "train DQN on CartPole-v1 from a prioritized table (gorgonia, or -backend gpu)",
		Long: `Trains DQN on CartPole-v1 from a prioritized trajring table; the defaults are RL
Baselines3 Zoo's tuned DQN settings, with a learning rate falling linearly to
-lr-end over the run. Every -eval-every env steps the network plays
-eval-episodes greedy episodes; as RL Zoo's EvalCallback does, the best of
these evaluations is kept (best.gob) besides the last network (q.gob), and
the run ends by evaluating both on -eval-episodes fresh episodes: the last
line is the best network's, the one to use. An evaluation that reaches
-stop-return (500, every episode at the time limit) ends the run early, as
SB3's StopTrainingOnRewardThreshold does. Writes metrics.jsonl (one line per
training round), curve.svg and curve.png, q.gob and best.gob to -out;
trajring eval plays a saved network.

With -checkpoint-every N (env steps; 0: off) the whole run is checkpointed
into -out every N env steps and at the end: the replay buffer and its table
(replay-NNNNNN.ckpt, readable with trajring inspect), the learner state
(state-NNNNNN.gob: networks, Adam, counters, schedules, random sources,
metrics history) and checkpoint.json, written last, naming both; a crash
at any moment leaves the previous checkpoint whole. -resume continues from
-out's newest checkpoint with its configuration; flags given explicitly
override it (-steps extends the run; flags that change the learner are
refused). The environment is reset on resume: the episode in flight at the
checkpoint is cut, and metrics.jsonl is rewritten up to the checkpoint.

Ctrl-C (SIGINT) or SIGTERM ends the run as a stop does: the outputs are
written from the state at the interrupt (without the final evaluations), a
final checkpoint when checkpoints are on, and train exits with status 130
(143 for SIGTERM) and one line saying where they are. Every file is written
atomically (a temporary file beside it, fsynced and renamed), so a failed or
killed run leaves the previous run's files whole.

-backend gpu (a build with -tags trajring_cuda) keeps the replay buffer on
the gpu backend and trains the device learner (dqn.DeviceLearner) on the
sampled transitions in place, with the same flags and outputs; the progress
and metrics.jsonl add the bytes copied device-to-host per gradient step
(0: the table selects and takes priorities on the device) and gradient
steps/s. default and cpu train the gorgonia
learner from a buffer on the cpu backend.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := f.checkOut(); err != nil {
				return err
			}
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
	fs.IntVar(&c.Steps, "steps", d.Steps, "env steps")
	fs.StringVar(&f.hidden, "hidden", joinInts(d.Agent.Hidden), "hidden layer sizes")
	fs.Float64Var(&c.Agent.LearningRate, "lr", d.Agent.LearningRate, "Adam learning rate at the start")
	fs.Float64Var(&c.LearningRateEnd, "lr-end", d.LearningRateEnd, "Adam learning rate at the end, reached linearly from -lr (default 0, as RL Zoo's lin_ schedules; equal to -lr: constant; above -lr: refused)")
	fs.IntVar(&c.Agent.BatchSize, "batch", d.Agent.BatchSize, "batch size")
	fs.IntVar(&c.BufferSize, "buffer", d.BufferSize, "replay capacity (transitions)")
	fs.IntVar(&c.LearningStarts, "learning-starts", d.LearningStarts, "env steps before training")
	fs.Float64Var(&c.Gamma, "gamma", d.Gamma, "discount factor")
	fs.IntVar(&c.NStep, "n-step", d.NStep, "n of n-step targets (items of n+1 steps)")
	fs.IntVar(&c.TargetUpdateInterval, "target-update", d.TargetUpdateInterval, "target network update interval (env steps)")
	fs.IntVar(&c.TrainFreq, "train-freq", d.TrainFreq, "env steps between training rounds")
	fs.IntVar(&c.GradientSteps, "gradient-steps", d.GradientSteps, "gradient steps per training round")
	fs.Float64Var(&c.ExplorationFraction, "exploration-fraction", d.ExplorationFraction, "fraction of the steps over which epsilon decays")
	fs.Float64Var(&c.ExplorationFinalEps, "exploration-final-eps", d.ExplorationFinalEps, "final epsilon")
	fs.BoolVar(&c.Prioritized, "per", d.Prioritized, "prioritized replay (false: uniform, as SB3's DQN)")
	fs.Float64Var(&c.Alpha, "alpha", d.Alpha, "priority exponent")
	fs.Float64Var(&c.Beta, "beta", d.Beta, "initial importance-weight exponent (annealed to 1)")
	fs.BoolVar(&c.Agent.DoubleDQN, "double", d.Agent.DoubleDQN, "double DQN targets")
	fs.Float64Var(&c.Agent.MaxGradNorm, "max-grad-norm", d.Agent.MaxGradNorm, "global gradient norm clip (negative: none)")
	fs.IntVar(&c.EvalEpisodes, "eval-episodes", d.EvalEpisodes, "greedy episodes of every evaluation")
	fs.IntVar(&c.EvalEvery, "eval-every", d.EvalEvery, "env steps between greedy evaluations choosing the best network (0: none)")
	fs.Float64Var(&c.StopOnReturn, "stop-return", d.StopOnReturn, "end the run at the first evaluation whose mean return reaches this (0: never)")
	fs.Uint64Var(&c.Seed, "seed", d.Seed, "seed")
	fs.StringVar(&c.Backend, "backend", dqn.BackendDefault, "learner and replay backend: default or cpu (gorgonia learner), gpu (device learner; needs a trajring_cuda build)")
	fs.StringVar(&f.out, "out", "trajring-train", "directory for metrics.jsonl, curve.svg, curve.png, q.gob, best.gob and checkpoints")
	c.Agent.PriorityEpsilon = d.Agent.PriorityEpsilon // no flag
	fs.IntVar(&c.CheckpointEvery, "checkpoint-every", 10_000, "env steps between checkpoints into -out (0: none)")
	fs.BoolVar(&c.CheckpointCompress, "compress", true, "zstd-compress the replay checkpoints (-compress=false writes them raw)")
	fs.BoolVar(&f.resume, "resume", false, "continue from the newest checkpoint in -out")
	fs.DurationVar(&f.progress, "progress", 5*time.Second, "progress on stderr: a bar on a terminal, else a line at this interval (0: none)")
	f.metrics.register(fs)
	return cmd
}

// validate checks the flags: those the command itself interprets, then
// the training configuration (dqn.TrainConfig.Validate, including its
// memory check), naming the flag of a bad field.
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
	if err := f.checkOut(); err != nil {
		return err
	}
	if lr, end := f.cfg.Agent.LearningRate, f.cfg.LearningRateEnd; end > lr && lr > 0 && !math.IsInf(lr, 0) {
		return usageErrorf("-lr-end %v: want at most -lr %v (the learning rate falls linearly from -lr to -lr-end)", end, lr)
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
	if err := f.cfg.Validate(); err != nil {
		var fe *dqn.FieldError
		if errors.As(err, &fe) {
			if name, ok := trainFlagOf[fe.Field]; ok {
				v := fmt.Sprint(fe.Value)
				if name == "hidden" {
					v = f.hidden
				}
				return usageErrorf("-%s %s: want %s", name, v, fe.Want)
			}
		}
		return usageErrorf("%v", err)
	}
	return nil
}

// checkOut refuses an empty -out, which names no directory.
func (f *trainFlags) checkOut() error {
	if f.out == "" {
		return usageErrorf("-out: name the directory for the metrics, curves, networks and checkpoints (got \"\")")
	}
	return nil
}

// trainFlagOf names the flag of each dqn.TrainConfig field.
var trainFlagOf = map[string]string{
	"Steps": "steps", "BufferSize": "buffer", "LearningStarts": "learning-starts", "Gamma": "gamma", "NStep": "n-step",
	"TargetUpdateInterval": "target-update", "TrainFreq": "train-freq", "GradientSteps": "gradient-steps",
	"ExplorationFraction": "exploration-fraction", "ExplorationFinalEps": "exploration-final-eps",
	"LearningRateEnd": "lr-end", "StopOnReturn": "stop-return", "Alpha": "alpha", "Beta": "beta", "EvalEpisodes": "eval-episodes", "EvalEvery": "eval-every",
	"CheckpointEvery": "checkpoint-every", "Agent.BatchSize": "batch", "Agent.LearningRate": "lr",
	"Agent.MaxGradNorm": "max-grad-norm", "Agent.Hidden": "hidden", "Backend": "backend",
}

// resumableFlags may differ from the checkpoint's on -resume: they do not
// change the learner (dqn.TrainConfig.Resume).
var resumableFlags = map[string]bool{
	"steps": true, "eval-episodes": true, "eval-every": true, "checkpoint-every": true, "compress": true, "out": true, "resume": true,
	"progress": true, "metrics": true, "metrics-format": true, "metrics-every": true, "metrics-log": true, "env": true,
}

func joinInts(xs []int) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = strconv.Itoa(x)
	}
	return strings.Join(s, ",")
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
	f.hidden = joinInts(ck.Config.Agent.Hidden)
	names := slices.Sorted(maps.Keys(changed))
	for _, name := range names {
		fl := fs.Lookup(name)
		saved := fl.Value.String()
		if err := fs.Set(name, changed[name]); err != nil {
			return usageErrorf("-%s: %v", name, err)
		}
		now := fl.Value.String()
		if name == "backend" { // default and cpu are the same learner
			now, saved = dqn.LearnerBackend(now), dqn.LearnerBackend(saved)
		}
		if !resumableFlags[name] && now != saved {
			return usageErrorf("-%s %s: the run in %s was trained with -%s %s, and a resumed run keeps its learner's settings "+
				"(it may change -steps, -eval-episodes, -eval-every and -checkpoint-every)", name, now, f.out, name, saved)
		}
	}
	return nil
}

// runTrain trains, with progress on stderr, and writes the outputs, each
// atomically. A SIGINT or SIGTERM ends the run as a stop does
// (dqn.TrainConfig.Interrupt): the outputs are written as at the run's
// end, from the state at the interrupt, a final checkpoint when
// checkpoints are on, and the error is an interruptedError saying where
// they are (exit status 130 or 143).
func runTrain(f trainFlags, stdout, stderr io.Writer) (err error) {
	_, statErr := os.Stat(f.out)
	if err := os.MkdirAll(f.out, 0o755); err != nil {
		return err
	}
	if errors.Is(statErr, fs.ErrNotExist) {
		// A run that fails before writing anything (no usable GPU, say)
		// leaves no empty -out behind; os.Remove keeps a non-empty one.
		defer func() {
			if err != nil && !errors.As(err, new(*interruptedError)) {
				_ = os.Remove(f.out)
			}
		}()
	}
	// metrics.jsonl is written from the first round, or on resume from
	// the history up to the checkpoint, into a temporary file that is put
	// in place at the end: a run or resume that fails leaves the old file
	// alone.
	var mf *atomicfile.File
	var bw *bufio.Writer
	var enc *json.Encoder
	var curve, evals plotter.XYs
	var encErr error
	defer func() {
		if mf != nil {
			mf.Close() // abandons it unless committed
		}
	}()
	prog := newProgress(stderr, "train", "env steps", int64(f.cfg.Steps), f.progress)
	record := func(p dqn.Progress) {
		if mf == nil && encErr == nil {
			if mf, encErr = atomicfile.Create(filepath.Join(f.out, "metrics.jsonl"), 0o666); encErr == nil {
				bw = bufio.NewWriter(mf)
				enc = json.NewEncoder(bw)
			}
		}
		if enc != nil {
			if err := enc.Encode(p); err != nil && encErr == nil {
				encErr = err
			}
		}
		curve = append(curve, plotter.XY{X: float64(p.EnvSteps), Y: p.TrainReturn})
		if p.EvalReturn != nil {
			evals = append(evals, plotter.XY{X: float64(p.EnvSteps), Y: *p.EvalReturn})
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
		prog.set(p.EnvSteps, trainDetail(p, f.cfg.Backend == dqn.BackendGPU))
		if p.EvalReturn != nil && f.progress > 0 {
			prog.println(fmt.Sprintf("train: greedy evaluation at %d env steps: %.1f", p.EnvSteps, *p.EvalReturn))
		}
	}
	// -metrics records the collection of this run (from its start, or from
	// the resume) through an observer.MetricsLog on the collection driver.
	mlog, mfile, err := f.metrics.open(1, stderr)
	if err != nil {
		return err
	}
	if mfile != nil {
		defer mfile.Close() // on the error paths; committed and checked below
		f.cfg.Observers = append(f.cfg.Observers, mlog)
	}
	sig := catchSignals(context.Background())
	defer sig.stop()
	f.cfg.Interrupt = sig.context().Done()
	res, err := dqn.RunCartPole(context.Background(), f.cfg)
	prog.finish("")
	if err != nil {
		return err
	}
	if err := finishMetrics(mlog, mfile); err != nil {
		return err
	}
	var wrote []string
	if mf != nil { // nil when no round ran (an interrupt at once)
		if encErr == nil {
			encErr = bw.Flush()
		}
		if encErr == nil {
			encErr = mf.Commit()
		}
		wrote = append(wrote, filepath.Join(f.out, "metrics.jsonl"))
	}
	if encErr != nil {
		return fmt.Errorf("writing metrics: %w", encErr)
	}
	wrote = append(wrote, filepath.Join(f.out, "curve.svg"), filepath.Join(f.out, "curve.png"))
	if err := writeNetwork(filepath.Join(f.out, "q.gob"), res.Network.Save); err != nil {
		return err
	}
	wrote = append(wrote, filepath.Join(f.out, "q.gob"))
	bestPath := filepath.Join(f.out, "best.gob")
	if res.Best != nil {
		if err := writeNetwork(bestPath, res.Best.Save); err != nil {
			return err
		}
		wrote = append(wrote, bestPath)
	} else if err := os.Remove(bestPath); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err // an earlier run's best.gob would pass for this one's
	}
	l := res.Last
	for _, ext := range []string{"svg", "png"} {
		if err := plotCurve(filepath.Join(f.out, "curve."+ext), curve, evals, res, l.EnvSteps); err != nil {
			return err
		}
	}
	learner := l.SampleSeconds + l.TrainSeconds
	fmt.Fprintf(stdout, "env steps %d, gradient steps %d, episodes %d in %.1fs (collect %.1fs, learner %.1fs)\n",
		l.EnvSteps, l.GradientSteps, l.Episodes, l.Elapsed, l.CollectSecs, learner)
	if res.Interrupted {
		where := "no checkpoint (checkpoints are off: -checkpoint-every 0)"
		if res.Checkpointed {
			where = fmt.Sprintf("checkpoint %s (resume with -resume -out %s)", filepath.Join(f.out, dqn.ManifestFile), f.out)
		} else if f.cfg.CheckpointEvery > 0 {
			where = "no checkpoint (no env step was taken)"
		}
		return sig.interrupted("stopped at %d env steps; wrote %s; %s", l.EnvSteps, strings.Join(wrote, ", "), where)
	}
	if learner > 0 {
		fmt.Fprintf(stdout, "learner: %.0f gradient steps/s; sampling + priority updates %.2f%% of learner time; %.1f%% of sampled windows valid\n",
			float64(l.GradientSteps)/learner, 100*l.SampleSeconds/learner, 100*l.ValidFraction)
	}
	if f.cfg.Backend == dqn.BackendGPU {
		fmt.Fprintf(stdout, "device-to-host: %.0f bytes per gradient step in the last round; %d bytes in all (acting, losses, evaluations, checkpoints)\n",
			l.D2HPerGradStep, l.D2HBytes)
	}
	if res.FirstSolved >= 0 {
		fmt.Fprintf(stdout, "first greedy evaluation >= 475 at %d env steps\n", res.FirstSolved)
	}
	if res.Stopped {
		fmt.Fprintf(stdout, "stopped at %d env steps: the evaluation there reached -stop-return %g\n", l.EnvSteps, f.cfg.StopOnReturn)
	}
	fmt.Fprintf(stdout, "wrote %s\n", strings.Join(wrote, ", "))
	if f.cfg.CheckpointEvery > 0 {
		fmt.Fprintf(stdout, "checkpoint: %s (resume with -resume -out %s)\n", filepath.Join(f.out, dqn.ManifestFile), f.out)
	}
	n := f.cfg.EvalEpisodes
	if res.Best == nil {
		fmt.Fprintf(stdout, "mean return over %d greedy episodes: %.1f (last, at %d env steps; no evaluations chose a best network)\n",
			n, res.EvalReturn, l.EnvSteps)
		return nil
	}
	fmt.Fprintf(stdout, "last network (q.gob, %d env steps): mean return over %d greedy episodes: %.1f\n", l.EnvSteps, n, res.LastEvalReturn)
	fmt.Fprintf(stdout, "mean return over %d greedy episodes: %.1f (best, found at %d env steps)\n", n, res.EvalReturn, res.BestEnvSteps)
	return nil
}

// writeNetwork writes a network file through save, atomically: a failed
// or killed write leaves the file it replaces whole.
func writeNetwork(path string, save func(io.Writer) error) error {
	return atomicfile.Replace(path, 0o666, save)
}

// trainDetail is the state of training shown next to the progress, with
// the device-to-host bytes per gradient step on a gpu backend.
func trainDetail(p dqn.Progress, gpu bool) string {
	s := fmt.Sprintf("eps %.3f, loss %.4f, return(100) %.1f", p.Epsilon, p.Loss, p.TrainReturn)
	if p.GradStepsPerSec > 0 {
		s += fmt.Sprintf(", %.0f grad/s", p.GradStepsPerSec)
		if gpu {
			s += fmt.Sprintf(", D2H %.0f B/grad", p.D2HPerGradStep)
		}
	}
	return s
}

// plotCurve draws the training and evaluation curves, the last network's
// final evaluation and the best network's (at the steps it was found;
// neither for an interrupted run, which has no final evaluations),
// with the legend beside the plot; the file's extension chooses the format
// (svg, png; see figure.Save).
func plotCurve(path string, train, evals plotter.XYs, res *dqn.Result, steps int64) error {
	p := plot.New()
	p.Title.Text = "DQN on CartPole-v1 (trajring + gorgonia)"
	p.X.Label.Text = "env steps"
	p.Y.Label.Text = "episode return"
	p.Y.Min, p.Y.Max = 0, 520
	p.X.Min = 0
	var yt []plot.Tick
	for y := 0; y <= 500; y += 100 {
		yt = append(yt, plot.Tick{Value: float64(y), Label: strconv.Itoa(y)})
	}
	p.Y.Tick.Marker = plot.ConstantTicks(yt)
	p.Add(plotter.NewGrid())
	leg := plot.NewLegend()
	leg.Top, leg.Left = true, true
	leg.ThumbnailWidth = vg.Points(24)
	curve := func(name string, xys plotter.XYs, i int) error {
		l, pts, err := plotter.NewLinePoints(xys)
		if err != nil {
			return err
		}
		l.Color, pts.Color, pts.Shape = plotutil.Color(i), plotutil.Color(i), plotutil.Shape(i)
		if len(xys) > figure.MaxMarked {
			p.Add(l)
			leg.Add(name, l)
			return nil
		}
		p.Add(l, pts)
		leg.Add(name, l, pts)
		return nil
	}
	mark := func(name string, x, y float64, i int) error {
		pts, err := plotter.NewScatter(plotter.XYs{{X: x, Y: y}})
		if err != nil {
			return err
		}
		pts.Color, pts.Shape, pts.Radius = plotutil.Color(i), plotutil.Shape(i), vg.Points(4)
		p.Add(pts)
		leg.Add(name, pts)
		return nil
	}
	if err := curve("training: mean return\nof the last 100 episodes", train, 0); err != nil {
		return err
	}
	if len(evals) > 0 {
		if err := curve("greedy evaluation", evals, 1); err != nil {
			return err
		}
	}
	if res.Interrupted { // no final evaluations
		return figure.Save(path, p, &leg, 9*vg.Inch, 4.5*vg.Inch, 2.3*vg.Inch)
	}
	if err := mark("last network,\nfinal evaluation", float64(steps), res.LastEvalReturn, 2); err != nil {
		return err
	}
	if res.Best != nil {
		if err := mark("best network,\nfinal evaluation", float64(res.BestEnvSteps), res.EvalReturn, 3); err != nil {
			return err
		}
	}
	return figure.Save(path, p, &leg, 9*vg.Inch, 4.5*vg.Inch, 2.3*vg.Inch)
}
