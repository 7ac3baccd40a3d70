package driver_test

import (
	"context"
	"fmt"

	"github.com/trajring/trajring/driver"
	"github.com/trajring/trajring/driver/envs"
)

// A step driver over the Counting environment (one row, episodes of 3
// steps) collecting 4 steps: the observer sees 5 trajectories, the fourth
// being the boundary between two episodes, which is not counted. The
// second run resumes where the first stopped.
func Example() {
	env, err := envs.NewCounting(3)
	if err != nil {
		panic(err)
	}
	policy, err := driver.NewRandomPolicy(env.ActionSpec(), 1)
	if err != nil {
		panic(err)
	}
	show := driver.ObserverFunc(func(t *driver.Trajectory) error {
		count := t.Observation[envs.CountName].Int64s()
		fmt.Printf("count %d: %v -> %v boundary=%v\n", count[0], t.StepType[0], t.NextStepType[0], t.IsBoundary(0))
		return nil
	})
	d, err := driver.NewStepDriver(env, policy, 4, driver.WithObservers(show))
	if err != nil {
		panic(err)
	}
	ts, state, err := d.Run(context.Background(), nil, nil)
	if err != nil {
		panic(err)
	}
	fmt.Printf("%+v\n", d.Stats())
	if _, _, err = d.Run(context.Background(), ts, state); err != nil {
		panic(err)
	}
	fmt.Printf("%+v\n", d.Stats())
	// Output:
	// count 0: F -> M boundary=false
	// count 1: M -> M boundary=false
	// count 2: M -> L boundary=false
	// count 3: L -> F boundary=true
	// count 4: F -> M boundary=false
	// {Iterations:5 Steps:4 Episodes:1}
	// count 5: M -> M boundary=false
	// count 6: M -> L boundary=false
	// count 7: L -> F boundary=true
	// count 8: F -> M boundary=false
	// count 9: M -> M boundary=false
	// {Iterations:5 Steps:4 Episodes:1}
}

// An episode driver collecting 2 complete episodes from every row of 8
// CartPoles (the unbiased per-row mode): idle rows are marked inactive.
func ExampleEpisodesPerRow() {
	env, err := envs.NewCartPole(8, 7)
	if err != nil {
		panic(err)
	}
	policy, err := driver.NewRandomPolicy(env.ActionSpec(), 7)
	if err != nil {
		panic(err)
	}
	var episodes [8]int
	count := driver.ObserverFunc(func(t *driver.Trajectory) error {
		for r := range t.StepType {
			if t.IsActive(r) && t.IsBoundary(r) {
				episodes[r]++
			}
		}
		return nil
	})
	d, err := driver.NewEpisodeDriver(env, policy, 2, driver.EpisodesPerRow(), driver.WithObservers(count))
	if err != nil {
		panic(err)
	}
	if _, _, err := d.Run(context.Background(), nil, nil); err != nil {
		panic(err)
	}
	fmt.Println(episodes, d.Stats().Episodes)
	// Output:
	// [2 2 2 2 2 2 2 2] 16
}
