package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/trajring/trajring/cpu"
	"github.com/trajring/trajring/driver"
	"github.com/trajring/trajring/driver/envs"
	"github.com/trajring/trajring/kernels"
	"github.com/trajring/trajring/observer"
	"github.com/trajring/trajring/tensorbuf"
)

// demoConfig holds the demo's flags.
type demoConfig struct {
	envs, steps, seqLen, batch, capacity int
	backend                              string
	seed                                 uint64
	progress                             time.Duration
	metrics                              metricsFlags
}

// newDemoCmd returns the demo command.
func newDemoCmd() *cobra.Command {
	var c demoConfig
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "collect CartPole experience while a learner samples it",
		Long: `Collects CartPole experience with a random policy and a step driver (TF-Agents'
DynamicStepDriver) into a sequence observer, while a learner goroutine samples
batches of sequences from the same table, then prints a summary.

-steps N collects N environment steps summed over the envs: the driver stops at
the first batched step that reaches N, so it collects between N and N+envs-1.

Sizes are checked before the environments are allocated: a buffer (-envs x
-capacity) or envs that do not fit in the memory available, or a -batch the
learner could never draw, is a usage error (exit status 2).

Ctrl-C (SIGINT) or SIGTERM ends the collection early: the demo prints the
summary of what it collected, writes the -metrics records so far, and exits
with status 130 (143 for SIGTERM). A second Ctrl-C quits at once.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := c.validate(); err != nil {
				return err
			}
			sigs := catchSignals(cmd.Context())
			defer sigs.stop()
			r, err := demo(sigs.context(), c, cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			printDemo(cmd.OutOrStdout(), c, r)
			if r.stopped {
				return sigs.interrupted("stopped after %d of %d env steps (the summary counts them)", r.envSteps, c.steps)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.SortFlags = false
	f.IntVar(&c.envs, "envs", 64, "number of CartPole environments stepped as one batch")
	f.IntVar(&c.steps, "steps", 200_000, "environment steps to collect, summed over envs (the last batched step may add up to envs-1 more)")
	f.IntVar(&c.seqLen, "seq", 8, "sequence length of the items the observer writes")
	f.IntVar(&c.batch, "batch", 256, "sequences per learner sample")
	f.IntVar(&c.capacity, "capacity", 4096, "steps kept per env row")
	f.StringVar(&c.backend, "backend", "default", "backend: default, cpu or gpu (gpu needs a cuda build)")
	f.Uint64Var(&c.seed, "seed", 1, "seed of the environments, policy and samplers")
	f.DurationVar(&c.progress, "progress", 2*time.Second, "progress on stderr: a bar on a terminal, else a line at this interval (0: none)")
	c.metrics.register(f)
	return cmd
}

// validate checks the flags' values; each error names its flag.
func (c *demoConfig) validate() error {
	for _, f := range []struct {
		name string
		v    int
	}{{"envs", c.envs}, {"steps", c.steps}, {"seq", c.seqLen}, {"batch", c.batch}, {"capacity", c.capacity}} {
		if f.v <= 0 {
			return usageErrorf("-%s must be positive, got %d", f.name, f.v)
		}
	}
	if c.capacity < c.seqLen {
		return usageErrorf("-capacity (%d) must be at least -seq (%d)", c.capacity, c.seqLen)
	}
	// A row holds at most capacity-seq+1 windows of seq steps; a table
	// that can never reach -batch items never lets the learner sample.
	if items, ok := kernels.Mul(int64(c.envs), int64(c.capacity-c.seqLen+1)); ok && int64(c.batch) > items {
		return usageErrorf("-batch %d exceeds the %d sequences the buffer can hold (-envs x (-capacity - -seq + 1)): the learner could never sample",
			c.batch, items)
	}
	switch c.backend {
	case "default", "cpu", "gpu":
	default:
		return usageErrorf("-backend: unknown backend %q (want default, cpu or gpu)", c.backend)
	}
	if c.progress < 0 {
		return usageErrorf("-progress must not be negative, got %v", c.progress)
	}
	if err := c.metrics.validate(int64(c.steps)); err != nil {
		return err
	}
	return nil
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
			return nil, fmt.Errorf("the gpu backend needs a build with -tags trajring_cuda")
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
	stopped            bool // ctx ended the collection early
}

// demo collects CartPole experience with a random policy and a step
// driver into a TrajectorySequence observer, while a learner goroutine
// samples sequence batches from the same table; progress goes to stderr.
// A ctx that ends during the collection stops it: the result then counts
// what was collected, with stopped set, and the error is nil.
func demo(ctx context.Context, c demoConfig, stderr io.Writer) (demoResult, error) {
	var r demoResult
	if ctx == nil {
		ctx = context.Background()
	}
	parent := ctx
	be, err := demoBackend(c.backend)
	if err != nil {
		return r, err
	}
	// The buffer comes first: New checks its sizes and memory before
	// allocating, and its figures bound what the rest may allocate.
	fields, err := cartPoleFields()
	if err != nil {
		return r, err
	}
	buf, err := tensorbuf.New(tensorbuf.Config{NumEnvs: c.envs, Capacity: c.capacity, Fields: fields, Backend: be, Seed: c.seed})
	if errors.Is(err, tensorbuf.ErrConfig) {
		return r, usageErrorf("-envs %d x -capacity %d: %v", c.envs, c.capacity, err)
	}
	if err != nil {
		return r, err
	}
	defer buf.Close()
	if err := checkDemoMemory(c, buf, demoMemAvailable); err != nil {
		return r, err
	}
	// The learner's batches are bounded by the buffer's sample limit:
	// refuse one over it now rather than after the table fills.
	batchSteps, ok := kernels.Mul(int64(c.batch), int64(c.seqLen))
	if bytes, ok2 := kernels.Mul(batchSteps, buf.StepBytes()); !ok || !ok2 || bytes > buf.SampleBudget() {
		return r, usageErrorf("-batch %d x -seq %d: a learner batch of %d-byte steps exceeds the sample limit of %d bytes (the buffer's memory, at least %d)",
			c.batch, c.seqLen, buf.StepBytes(), buf.SampleBudget(), int64(tensorbuf.MinSampleBudget))
	}
	env, err := envs.NewCartPole(c.envs, c.seed)
	if err != nil {
		return r, err
	}
	pol, err := driver.NewRandomPolicy(env.ActionSpec(), c.seed)
	if err != nil {
		return r, err
	}
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
	steps := new(observer.EnvironmentSteps)
	observers := []driver.Observer{obs, ret, length, steps}
	mlog, mfile, err := c.metrics.open(c.envs, stderr)
	if err != nil {
		return r, err
	}
	if mfile != nil {
		defer mfile.Close() // on the error paths; closed and checked below
	}
	if mlog != nil {
		observers = append(observers, mlog)
	}
	drv, err := driver.NewStepDriver(env, pol, c.steps, driver.WithObservers(observers...))
	if err != nil {
		return r, err
	}

	ctx, stop := context.WithCancel(ctx)
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
					stop() // the collection has no reader left
				}
				return
			}
			samples.Add(1)
		}
	}()

	// The progress reporter polls the step counter while the driver runs
	// its one run of c.steps steps.
	prog := newProgress(stderr, "demo", "env steps", int64(c.steps), c.progress)
	detail := func() string { return fmt.Sprintf("%d learner batches", samples.Load()) }
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	collected := make(chan struct{})
	var pw sync.WaitGroup
	pw.Add(1)
	go func() {
		defer pw.Done()
		for {
			select {
			case <-collected:
				return
			case <-tick.C:
				prog.set(steps.Result(), detail())
			}
		}
	}()

	start := time.Now()
	_, _, err = drv.Run(ctx, nil, nil)
	r.collect = time.Since(start)
	close(collected)
	pw.Wait()
	stop()
	wg.Wait()
	r.wall = time.Since(start)
	st := drv.Stats()
	r.envSteps, r.episodes = st.Steps, st.Episodes
	prog.set(r.envSteps, detail())
	prog.finish(detail())
	if learnErr != nil { // before err: a failed learner cancels the collection
		return r, fmt.Errorf("learner: %w", learnErr)
	}
	if err != nil && parent.Err() != nil { // stopped (Ctrl-C): report what was collected
		err, r.stopped = nil, true
	}
	if err != nil {
		return r, err
	}
	if err := finishMetrics(mlog, mfile); err != nil {
		return r, err
	}
	r.samples = samples.Load()
	r.sequences = r.samples * int64(c.batch)
	r.items = table.Size()
	r.avgReturn, r.avgLen = ret.Result(), length.Result()
	return r, nil
}

// demoEnvBytes bounds the host memory the demo holds per env besides the
// buffer: the cart-pole's state and random stream, the driver's and
// policy's batch tensors and the observers' per-row state. About 2.5 KB
// of allocations are measured per env; TestDemoEnvBytes keeps the
// constant above what a run allocates.
const demoEnvBytes = 4 << 10

// demoMemAvailable returns the host memory available for new allocations
// (cpu.MemAvailable); tests replace it.
var demoMemAvailable = cpu.MemAvailable

// checkDemoMemory refuses, as a usage error naming -envs, a demo whose
// per-env state plus (on the cpu backend) the buffer exceeds the host
// memory that memAvailable reports, so that a huge -envs fails before the
// environments are allocated rather than in the runtime's out-of-memory
// abort. A figure that cannot be read is not checked, as in tensorbuf.New.
func checkDemoMemory(c demoConfig, buf *tensorbuf.Buffer, memAvailable func() (int64, error)) error {
	avail, err := memAvailable()
	if err != nil {
		return nil
	}
	envBytes, ok := kernels.Mul(int64(c.envs), demoEnvBytes)
	var bufBytes int64
	if _, onHost := buf.Backend().(*cpu.Backend); onHost {
		bufBytes = buf.MemoryBytes()
	}
	if !ok || envBytes > avail-bufBytes {
		return usageErrorf("-envs %d: the demo needs about %d bytes of host memory (%d per env, %d for the buffer) but %d bytes are available",
			c.envs, envBytes+bufBytes, int64(demoEnvBytes), bufBytes, avail)
	}
	return nil
}

func printDemo(w io.Writer, c demoConfig, r demoResult) {
	sec := r.collect.Seconds()
	bytes := 2 * float64(r.sequences) * float64(r.seqLen) * float64(r.stepBytes) // read + write
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(w, "trajring demo: %d CartPole envs, random policy, step driver, sequences of %d, learner batches of %d, %s backend\n",
		c.envs, c.seqLen, c.batch, r.backend)
	fmt.Fprintln(tw, "env steps\tenv steps/s\tepisodes\titems\tlearner batches\tsequences/s\tsample GB/s\tavg return\tavg length\tseconds\t")
	fmt.Fprintf(tw, "%d\t%.0f\t%d\t%d\t%d\t%.0f\t%.3f\t%.1f\t%.1f\t%.2f\t\n",
		r.envSteps, float64(r.envSteps)/sec, r.episodes, r.items, r.samples, float64(r.sequences)/sec, bytes/sec/1e9,
		r.avgReturn, r.avgLen, sec)
	tw.Flush()
}
