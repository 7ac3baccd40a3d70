package driver_test

import (
	"context"
	"errors"
	"testing"

	"github.com/trajring/trajring/driver"
	"github.com/trajring/trajring/driver/envs"
)

// TestTypedNilRefused: nil and typed-nil environments, policies and
// observers are refused with ErrConfig instead of panicking (a typed-nil
// *envs.CartPole used to panic in NewStepDriver).
func TestTypedNilRefused(t *testing.T) {
	env := mustCounting(3)
	pol := newConstPolicy(env)
	var nilObs driver.ObserverFunc
	var nilTrObs driver.TransitionObserverFunc
	for _, tc := range []struct {
		name string
		env  driver.Environment
		pol  driver.Policy
		opts []driver.Option
	}{
		{"nil environment", nil, pol, nil},
		{"typed-nil CartPole", (*envs.CartPole)(nil), pol, nil},
		{"typed-nil Counting", (*envs.Counting)(nil), pol, nil},
		{"typed-nil Parallel", (*driver.Parallel)(nil), pol, nil},
		{"nil policy", env, nil, nil},
		{"typed-nil policy", env, (*driver.RandomPolicy)(nil), nil},
		{"typed-nil observer", env, pol, []driver.Option{driver.WithObservers(nilObs)}},
		{"typed-nil transition observer", env, pol, []driver.Option{driver.WithTransitionObservers(nilTrObs)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := driver.NewStepDriver(tc.env, tc.pol, 1, tc.opts...); !errors.Is(err, driver.ErrConfig) {
				t.Errorf("NewStepDriver: %v, want ErrConfig", err)
			}
			if _, err := driver.NewEpisodeDriver(tc.env, tc.pol, 1, tc.opts...); !errors.Is(err, driver.ErrConfig) {
				t.Errorf("NewEpisodeDriver: %v, want ErrConfig", err)
			}
		})
	}
	if _, err := driver.NewParallel([]driver.Env{(*envs.CartPoleEnv)(nil)}, 1); !errors.Is(err, driver.ErrConfig) {
		t.Errorf("NewParallel with a typed-nil env: %v, want ErrConfig", err)
	}
}

// TestRunNilContext: a nil context is refused with ErrInvalidArg before
// anything runs (the environment is not even reset), instead of panicking.
func TestRunNilContext(t *testing.T) {
	env := mustCounting(3, 2)
	sd, err := driver.NewStepDriver(env, newConstPolicy(env), 4)
	if err != nil {
		t.Fatal(err)
	}
	ed, err := driver.NewEpisodeDriver(env, newConstPolicy(env), 1)
	if err != nil {
		t.Fatal(err)
	}
	edRow, err := driver.NewEpisodeDriver(env, newConstPolicy(env), 1, driver.EpisodesPerRow())
	if err != nil {
		t.Fatal(err)
	}
	var nilCtx context.Context
	for name, run := range map[string]func(context.Context, *driver.TimeStep, any) (*driver.TimeStep, any, error){
		"StepDriver":             sd.Run,
		"EpisodeDriver":          ed.Run,
		"EpisodeDriver (perRow)": edRow.Run,
	} {
		ts, state, err := run(nilCtx, nil, "state")
		if !errors.Is(err, driver.ErrInvalidArg) || ts != nil || state != "state" {
			t.Errorf("%s.Run(nil ctx) = %v, %v, %v; want nil, state, ErrInvalidArg", name, ts, state, err)
		}
	}
	if env.Current() != nil {
		t.Fatalf("a refused run reset the environment")
	}
	if got := sd.Stats(); got != (driver.RunStats{}) {
		t.Fatalf("Stats after a refused run = %+v", got)
	}
}
