package observer_test

import (
	"context"
	"fmt"
	"log"

	"github.com/trajring/trajring/driver"
	"github.com/trajring/trajring/driver/envs"
	"github.com/trajring/trajring/observer"
	"github.com/trajring/trajring/tensorbuf"
)

// ExampleShared feeds an episode table and a sequence table from one
// collection: the group stores every step once and each member creates
// the items it would create alone.
func ExampleShared() {
	env, err := envs.NewCounting(3)
	if err != nil {
		log.Fatal(err)
	}
	policy, err := driver.NewRandomPolicy(env.ActionSpec(), 1)
	if err != nil {
		log.Fatal(err)
	}
	spec := observer.DataSpec(env, policy)
	buf, err := tensorbuf.New(tensorbuf.Config{NumEnvs: env.BatchSize(), Capacity: 64, Fields: spec})
	if err != nil {
		log.Fatal(err)
	}
	defer buf.Close()
	for _, name := range []string{"episodes", "windows"} {
		if _, err := buf.NewTable(tensorbuf.TableConfig{Name: name, Selector: tensorbuf.FIFO}); err != nil {
			log.Fatal(err)
		}
	}
	g, err := observer.NewShared(buf, observer.SharedConfig{DataSpec: spec})
	if err != nil {
		log.Fatal(err)
	}
	defer g.Close()
	episodes, err := g.NewAddEpisode(observer.AddEpisodeConfig{Tables: []string{"episodes"}, MaxSequenceLength: 8})
	if err != nil {
		log.Fatal(err)
	}
	windows, err := g.NewTrajectorySequence(observer.SequenceConfig{Tables: []string{"windows"}, SequenceLength: 2, Stride: 2})
	if err != nil {
		log.Fatal(err)
	}
	d, err := driver.NewStepDriver(env, policy, 6, driver.WithObservers(g)) // the group, not its members
	if err != nil {
		log.Fatal(err)
	}
	if _, _, err := d.Run(context.Background(), nil, nil); err != nil {
		log.Fatal(err)
	}
	fmt.Println("steps stored:", buf.Size())
	fmt.Println("episode items:", episodes.Stats().Items)
	fmt.Println("window items:", windows.Stats().Items)
	// Output:
	// steps stored: 7
	// episode items: 1
	// window items: 3
}
