package bench

import (
	"context"
	"fmt"

	"github.com/trajring/trajring/driver"
	"github.com/trajring/trajring/driver/envs"
	"github.com/trajring/trajring/observer"
	"github.com/trajring/trajring/tensorbuf"
)

// driverScenario times one batched step of a step driver (one iteration
// per Run, resumed from the previous Run's time step and state) with a
// random policy, and optional observers.
func (r *runner) driverScenario(name string, env driver.Environment, obs ...driver.Observer) (*scenario, func(), error) {
	pol, err := driver.NewRandomPolicy(env.ActionSpec(), 1)
	if err != nil {
		return nil, nil, err
	}
	d, err := driver.NewStepDriver(env, pol, 1<<62, driver.WithMaxIterations(1), driver.WithObservers(obs...))
	if err != nil {
		return nil, nil, err
	}
	n := env.BatchSize()
	sc := &scenario{row: Row{Scenario: name, Group: "driver", B: n, L: 1}}
	ctx := context.Background()
	var ts *driver.TimeStep
	var state any
	sc.ours = func() error {
		var err error
		ts, state, err = d.Run(ctx, ts, state)
		return err
	}
	return sc, func() {}, nil
}

// driverGroup: the driver's own overhead with the no-op environment,
// CartPole's env steps per second, and CartPole collected into a buffer
// through a sequence observer (the whole collect path).
func (r *runner) driverGroup(ctx context.Context) error {
	for _, n := range []int{1, 16, 256} {
		env, err := envs.NewNoop(n)
		if err != nil {
			return err
		}
		if err := r.runDriver(r.driverScenario(fmt.Sprintf("driver noop envs=%d", n), env)); err != nil {
			return err
		}
	}
	for _, n := range []int{1, 256} {
		env, err := envs.NewCartPole(n, 1)
		if err != nil {
			return err
		}
		if err := r.runDriver(r.driverScenario(fmt.Sprintf("driver cartpole envs=%d", n), env)); err != nil {
			return err
		}
	}
	name := "collect cartpole envs=256 -> buffer (L=2 items)"
	if !r.want(name) {
		return ctx.Err()
	}
	env, err := envs.NewCartPole(256, 2)
	if err != nil {
		return err
	}
	fields := append(append([]tensorbuf.Field{}, env.ObservationSpec()...), env.ActionSpec()...)
	buf, err := tensorbuf.New(tensorbuf.Config{NumEnvs: 256, Capacity: 4096, Fields: fields, Backend: r.be, Seed: 3})
	if err != nil {
		return err
	}
	defer buf.Close()
	if _, err := buf.NewTable(tensorbuf.TableConfig{Name: "replay", Selector: tensorbuf.Uniform, MaxSize: 1 << 20, Seed: 4}); err != nil {
		return err
	}
	seq, err := observer.NewTrajectorySequence(buf, observer.SequenceConfig{Tables: []string{"replay"}, SequenceLength: 2})
	if err != nil {
		return err
	}
	sc, rel, err := r.driverScenario(name, env, seq)
	if err != nil {
		return err
	}
	// Run past the ring's first wrap, so that the table's and the rows'
	// bookkeeping has reached its steady size (eviction under way) before
	// allocations are counted.
	for range 4096 + 256 {
		if err := sc.ours(); err != nil {
			return err
		}
	}
	sc.row.S = fieldBytes(fields) + builtinStepBytes
	sc.row.Note = "S: bytes written per env step"
	return r.runDriver(sc, rel, nil)
}

func fieldBytes(fs []tensorbuf.Field) int64 {
	var s int64
	for _, f := range fs {
		s += int64(f.StepBytes())
	}
	return s
}

// runDriver measures a driver scenario and notes its µs per env step.
func (r *runner) runDriver(sc *scenario, release func(), err error) error {
	if err := r.run(sc, release, err); err != nil {
		return err
	}
	if n := len(r.rep.Rows); n > 0 && r.rep.Rows[n-1].Scenario == sc.row.Scenario {
		row := &r.rep.Rows[n-1]
		perStep := fmt.Sprintf("%.3f µs per env step", row.Ours.P50/1e3/float64(row.B))
		if row.Note != "" {
			row.Note = perStep + "; " + row.Note
		} else {
			row.Note = perStep
		}
	}
	return nil
}
