package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/trajring/trajring/cpu"
	"github.com/trajring/trajring/driver"
	"github.com/trajring/trajring/driver/envs"
	"github.com/trajring/trajring/observer"
	"github.com/trajring/trajring/tensorbuf"
)

// demoConfig holds the demo's flags.
type demoConfig struct {
	envs, steps, seqLen, batch, capacity int
	backend                              string
	seed                                 uint64
	progress                             time.Duration
}

func parseDemo(args []string, stderr io.Writer) (demoConfig, error) {
	var c demoConfig
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.IntVar(&c.envs, "envs", 64, "number of CartPole environments stepped as one batch")
	fs.IntVar(&c.steps, "steps", 200_000, "environment steps to collect (summed over envs)")
	fs.IntVar(&c.seqLen, "seq", 8, "sequence length of the items the observer writes")
	fs.IntVar(&c.batch, "batch", 256, "sequences per learner sample")
	fs.IntVar(&c.capacity, "capacity", 4096, "steps kept per env row")
	fs.StringVar(&c.backend, "backend", "default", "backend: default, cpu or gpu (gpu needs a cuda build)")
	fs.Uint64Var(&c.seed, "seed", 1, "seed of the environments, policy and samplers")
	fs.DurationVar(&c.progress, "progress", 2*time.Second, "interval of the progress line on stderr (0: none)")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("unexpected arguments %v", fs.Args())
	}
	if c.envs <= 0 || c.steps <= 0 || c.seqLen <= 0 || c.batch <= 0 || c.capacity < c.seqLen {
		return c, fmt.Errorf("flags must be positive and -capacity at least -seq")
	}
	return c, nil
}

func demoBackend(name string) (tensorbuf.Backend, error) {
	switch name {
	case "default":
		be, err := tensorbuf.DefaultBackend()
		if err != nil { // a cuda build without a usable GPU
			fmt.Fprintf(os.Stderr, "trajring demo: %v; running on the cpu backend\n", err)
			return cpu.New(), nil
		}
		return be, nil
	case "cpu":
		return cpu.New(), nil
	case "gpu":
		be, err := tensorbuf.DefaultBackend()
		if err != nil {
			return nil, err
		}
		if be.Name() != "gpu" {
			return nil, fmt.Errorf("the gpu backend needs a build with -tags cuda")
		}
		return be, nil
	}
	return nil, fmt.Errorf("unknown backend %q", name)
}

// demoResult is what the demo measured.
type demoResult struct {
	backend            string
	envSteps, episodes int64
	items              int
	samples, sequences int64
	stepBytes          int64
	seqLen             int
	collect, wall      time.Duration
	avgReturn, avgLen  float64
}

// runDemo collects CartPole experience with a random policy and an episode
// driver into a TrajectorySequence observer, while a learner goroutine
// samples sequence batches from the same table, then prints a summary.
func runDemo(args []string, stdout, stderr io.Writer) error {
	c, err := parseDemo(args, stderr)
	if err != nil {
		return err
	}
	r, err := demo(c, stderr)
	if err != nil {
		return err
	}
	printDemo(stdout, c, r)
	return nil
}

func demo(c demoConfig, stderr io.Writer) (demoResult, error) {
	var r demoResult
	be, err := demoBackend(c.backend)
	if err != nil {
		return r, err
	}
	env, err := envs.NewCartPole(c.envs, c.seed)
	if err != nil {
		return r, err
	}
	pol, err := driver.NewRandomPolicy(env.ActionSpec(), c.seed)
	if err != nil {
		return r, err
	}
	fields := append(append([]tensorbuf.Field(nil), env.ObservationSpec()...), env.ActionSpec()...)
	buf, err := tensorbuf.New(tensorbuf.Config{NumEnvs: c.envs, Capacity: c.capacity, Fields: fields, Backend: be, Seed: c.seed})
	if err != nil {
		return r, err
	}
	defer buf.Close()
	r.backend, r.stepBytes, r.seqLen = be.Name(), buf.StepBytes(), c.seqLen
	table, err := buf.NewTable(tensorbuf.TableConfig{
		Name: "replay", Selector: tensorbuf.Uniform, Seed: c.seed,
		RateLimiter: &tensorbuf.RateLimiter{MinSize: c.batch},
	})
	if err != nil {
		return r, err
	}
	obs, err := observer.NewTrajectorySequence(buf, observer.SequenceConfig{Tables: []string{"replay"}, SequenceLength: c.seqLen})
	if err != nil {
		return r, err
	}
	defer obs.Close()
	ret, err := observer.NewAverageReturn(c.envs, 100)
	if err != nil {
		return r, err
	}
	length, err := observer.NewAverageEpisodeLength(c.envs, 100)
	if err != nil {
		return r, err
	}
	drv, err := driver.NewEpisodeDriver(env, pol, c.envs, driver.WithObservers(obs, ret, length))
	if err != nil {
		return r, err
	}

	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	var samples atomic.Int64
	var learnErr error
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // the learner: samples batches for as long as collection runs
		defer wg.Done()
		bt := new(tensorbuf.Batch)
		defer bt.Release()
		for ctx.Err() == nil {
			if err := table.SampleInto(ctx, bt, c.batch); err != nil {
				if ctx.Err() == nil {
					learnErr = err
				}
				return
			}
			samples.Add(1)
		}
	}()

	start := time.Now()
	last := start
	var ts *driver.TimeStep
	var state any
	for r.envSteps < int64(c.steps) {
		if ts, state, err = drv.Run(ctx, ts, state); err != nil {
			stop()
			wg.Wait()
			return r, err
		}
		st := drv.Stats()
		r.envSteps += st.Steps
		r.episodes += st.Episodes
		if c.progress > 0 && time.Since(last) >= c.progress {
			last = time.Now()
			el := last.Sub(start).Seconds()
			fmt.Fprintf(stderr, "demo: %d/%d env steps (%.0f/s), %d learner batches\n", r.envSteps, c.steps, float64(r.envSteps)/el, samples.Load())
		}
	}
	r.collect = time.Since(start)
	stop()
	wg.Wait()
	r.wall = time.Since(start)
	if learnErr != nil {
		return r, fmt.Errorf("learner: %w", learnErr)
	}
	r.samples = samples.Load()
	r.sequences = r.samples * int64(c.batch)
	r.items = table.Size()
	r.avgReturn, r.avgLen = ret.Result(), length.Result()
	return r, nil
}

func printDemo(w io.Writer, c demoConfig, r demoResult) {
	sec := r.collect.Seconds()
	bytes := 2 * float64(r.sequences) * float64(r.seqLen) * float64(r.stepBytes) // read + write
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(w, "trajring demo: %d CartPole envs, random policy, episode driver, sequences of %d, learner batches of %d, %s backend\n",
		c.envs, c.seqLen, c.batch, r.backend)
	fmt.Fprintln(tw, "env steps\tenv steps/s\tepisodes\titems\tlearner batches\tsequences/s\tsample GB/s\tavg return\tavg length\tseconds\t")
	fmt.Fprintf(tw, "%d\t%.0f\t%d\t%d\t%d\t%.0f\t%.3f\t%.1f\t%.1f\t%.2f\t\n",
		r.envSteps, float64(r.envSteps)/sec, r.episodes, r.items, r.samples, float64(r.sequences)/sec, bytes/sec/1e9,
		r.avgReturn, r.avgLen, sec)
	tw.Flush()
}
