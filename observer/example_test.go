package observer_test

import (
	"context"
	"fmt"
	"log"
	"strings"

	"github.com/trajring/trajring/driver"
	"github.com/trajring/trajring/driver/envs"
	"github.com/trajring/trajring/observer"
	"github.com/trajring/trajring/tensorbuf"
)

// Example collects from two Counting rows (episodes F M L and F M M L,
// boundary included) with a step driver into an AddTrajectory observer
// of sequence length 4 with padding, then reads the table back.
func Example() {
	ctx := context.Background()
	env, err := envs.NewCounting(2, 3)
	if err != nil {
		log.Fatal(err)
	}
	// The buffer stores the environment's observations and actions.
	fields := append(env.ObservationSpec(), env.ActionSpec()...)
	buf, err := tensorbuf.New(tensorbuf.Config{NumEnvs: env.BatchSize(), Capacity: 64, Fields: fields})
	if err != nil {
		log.Fatal(err)
	}
	defer buf.Close()
	table, err := buf.NewTable(tensorbuf.TableConfig{Name: "seq", Selector: tensorbuf.FIFO})
	if err != nil {
		log.Fatal(err)
	}
	obs, err := observer.NewAddTrajectory(buf, observer.AddTrajectoryConfig{
		Tables:           []observer.TableSequence{{Table: "seq", SequenceLength: 4}},
		PadEndOfEpisodes: true,
	})
	if err != nil {
		log.Fatal(err)
	}
	defer obs.Close()
	steps := &observer.EnvironmentSteps{}
	policy, err := driver.NewRandomPolicy(env.ActionSpec(), 1)
	if err != nil {
		log.Fatal(err)
	}
	d, err := driver.NewStepDriver(env, policy, 8, driver.WithObservers(obs, steps))
	if err != nil {
		log.Fatal(err)
	}
	if _, _, err := d.Run(ctx, nil, nil); err != nil {
		log.Fatal(err)
	}
	fmt.Println("environment steps:", steps.Result(), "items:", table.Size())

	// A training loop would Sample; All dumps the table in insertion
	// order. Tensors may live on a GPU: Host copies them.
	all, err := table.All()
	if err != nil {
		log.Fatal(err)
	}
	defer all.Release()
	host, err := all.Host()
	if err != nil {
		log.Fatal(err)
	}
	defer host.Release()
	n, l := host.Len()
	count := host.Fields[envs.CountName].Data().([]int64)
	stepType := host.StepType.Data().([]int32)
	mask := host.Mask.Data().([]bool)
	for i := range n {
		var s []string
		for k := i * l; k < (i+1)*l; k++ {
			if mask[k] {
				s = append(s, fmt.Sprintf("%d%v", count[k], tensorbuf.StepType(stepType[k])))
			} else {
				s = append(s, "pad")
			}
		}
		fmt.Printf("row %d: %s\n", host.Items[i].Row, strings.Join(s, " "))
	}
	// Output:
	// environment steps: 8 items: 2
	// row 0: 0F 1M 2L pad
	// row 1: 0F 1M 2M 3L
}
