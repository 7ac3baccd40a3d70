package driver_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/trajring/trajring/driver"
	"github.com/trajring/trajring/driver/envs"
)

func noopParallel(tb testing.TB, n, workers int) *driver.Parallel {
	es := make([]driver.Env, n)
	for i := range es {
		es[i] = envs.NoopEnv{}
	}
	p, err := driver.NewParallel(es, workers)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { p.Close() })
	return p
}

// TestNoAllocations: once warmed up, a driver step allocates nothing with
// the built-in environments, the random policy and Parallel.
func TestNoAllocations(t *testing.T) {
	noop, _ := envs.NewNoop(16)
	cart, _ := envs.NewCartPole(16, 1)
	count := mustCounting(1, 2, 3)
	for name, env := range map[string]driver.Environment{
		"noop": noop, "cartpole": cart, "counting": count, "parallel": noopParallel(t, 16, 4),
	} {
		pol, err := driver.NewRandomPolicy(env.ActionSpec(), 1)
		if err != nil {
			t.Fatal(err)
		}
		calls := 0
		obs := driver.ObserverFunc(func(*driver.Trajectory) error { calls++; return nil })
		d, err := driver.NewStepDriver(env, pol, 10*env.BatchSize(), driver.WithObservers(obs))
		if err != nil {
			t.Fatal(err)
		}
		ts, state, err := d.Run(context.Background(), nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		allocs := testing.AllocsPerRun(20, func() {
			ts, state, err = d.Run(context.Background(), ts, state)
			if err != nil {
				t.Fatal(err)
			}
		})
		if allocs != 0 || calls < 210 {
			t.Errorf("%s: %v allocations per run of ~10 steps (%d observed steps)", name, allocs, calls)
		}
	}
}

// runBench runs b.N batched steps of env with pol and reports the time per
// environment step (one row of one batched step) and env steps per second.
func runBench(b *testing.B, env driver.Environment, pol driver.Policy) {
	b.Helper()
	n := env.BatchSize()
	obs := driver.ObserverFunc(func(*driver.Trajectory) error { return nil })
	d, err := driver.NewStepDriver(env, pol, 1<<62, driver.WithObservers(obs), driver.WithMaxIterations(b.N))
	if err != nil {
		b.Fatal(err)
	}
	ts, state, err := d.Run(context.Background(), nil, nil) // warm up: allocate buffers
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	if _, _, err := d.Run(context.Background(), ts, state); err != nil {
		b.Fatal(err)
	}
	el := time.Since(start)
	b.ReportMetric(float64(el.Nanoseconds())/1000/float64(b.N*n), "µs/env-step")
	b.ReportMetric(float64(b.N*n)/el.Seconds(), "env-steps/s")
}

// BenchmarkDriverOverhead: the driver's own cost per environment step, with
// the no-op environment and a policy that returns the same actions.
func BenchmarkDriverOverhead(b *testing.B) {
	for _, n := range []int{1, 16, 256} {
		b.Run(fmt.Sprintf("envs=%d", n), func(b *testing.B) {
			env, _ := envs.NewNoop(n)
			runBench(b, env, newConstPolicy(env))
		})
	}
}

// BenchmarkDriverNoopRandom: the same with the random policy.
func BenchmarkDriverNoopRandom(b *testing.B) {
	for _, n := range []int{1, 16, 256} {
		b.Run(fmt.Sprintf("envs=%d", n), func(b *testing.B) {
			env, _ := envs.NewNoop(n)
			pol, _ := driver.NewRandomPolicy(env.ActionSpec(), 1)
			runBench(b, env, pol)
		})
	}
}

// BenchmarkParallelNoop: the overhead of the Parallel worker pool over
// single no-op environments.
func BenchmarkParallelNoop(b *testing.B) {
	for _, n := range []int{1, 16, 256} {
		for _, w := range []int{1, 2} {
			b.Run(fmt.Sprintf("envs=%d/workers=%d", n, w), func(b *testing.B) {
				env := noopParallel(b, n, w)
				runBench(b, env, newConstPolicy(env))
			})
		}
	}
}

// BenchmarkCartPole: collection throughput with the vectorised CartPole
// and the random policy.
func BenchmarkCartPole(b *testing.B) {
	for _, n := range []int{1, 16, 64, 256} {
		b.Run(fmt.Sprintf("envs=%d", n), func(b *testing.B) {
			env, _ := envs.NewCartPole(n, 1)
			pol, _ := driver.NewRandomPolicy(env.ActionSpec(), 1)
			runBench(b, env, pol)
		})
	}
}

// BenchmarkParallelCartPole: CartPoleEnv values stepped by Parallel.
func BenchmarkParallelCartPole(b *testing.B) {
	for _, n := range []int{64, 256} {
		for _, w := range []int{1, 2} {
			b.Run(fmt.Sprintf("envs=%d/workers=%d", n, w), func(b *testing.B) {
				es := make([]driver.Env, n)
				for i := range es {
					es[i] = envs.NewCartPoleEnv(uint64(i))
				}
				env, err := driver.NewParallel(es, w)
				if err != nil {
					b.Fatal(err)
				}
				defer env.Close()
				pol, _ := driver.NewRandomPolicy(env.ActionSpec(), 1)
				runBench(b, env, pol)
			})
		}
	}
}
