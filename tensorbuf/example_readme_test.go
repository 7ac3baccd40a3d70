package tensorbuf_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/trajring/trajring/driver"
	"github.com/trajring/trajring/driver/envs"
	"github.com/trajring/trajring/observer"
	"github.com/trajring/trajring/tensorbuf"
	"gorgonia.org/tensor"
)

// The README's library example (docs/docs_test.go keeps the README's copy
// identical to the body of collectAndSample and writeDirectly).

// collectAndSample runs 64 CartPole envs with a random policy for 64
// episodes, writes every 8-step window into a prioritized table, samples
// 256 of them, writes priorities back and exports every transition.
func collectAndSample(ctx context.Context) error {
	env, err := envs.NewCartPole(64, 1)
	if err != nil {
		return err
	}
	pol, err := driver.NewRandomPolicy(env.ActionSpec(), 1)
	if err != nil {
		return err
	}
	buf, err := tensorbuf.New(tensorbuf.Config{NumEnvs: 64, Capacity: 4096,
		Fields: append(env.ObservationSpec(), env.ActionSpec()...)})
	if err != nil {
		return err
	}
	defer buf.Close()
	table, err := buf.NewTable(tensorbuf.TableConfig{Name: "replay", Selector: tensorbuf.Prioritized,
		Beta: 0.4, RateLimiter: &tensorbuf.RateLimiter{MinSize: 256}})
	if err != nil {
		return err
	}
	// The observer writes every row of the buffer (it owns them all).
	obs, err := observer.NewTrajectorySequence(buf, observer.SequenceConfig{Tables: []string{"replay"}, SequenceLength: 8})
	if err != nil {
		return err
	}
	drv, err := driver.NewEpisodeDriver(env, pol, 64, driver.WithObservers(obs))
	if err != nil {
		return err
	}
	if _, _, err := drv.Run(ctx, nil, nil); err != nil { // run again with (ts, state) to resume
		return err
	}

	batch := new(tensorbuf.Batch) // reused by every SampleInto: no allocation in steady state
	defer batch.Release()
	if err := table.SampleInto(ctx, batch, 256); err != nil { // [256, 8, ...] per field, plus mask
		return err
	}
	priorities := make([]float64, len(batch.Keys)) // a learner's |TD| errors
	for i := range priorities {
		priorities[i] = 0.5
	}
	if err := table.UpdatePriorities(batch.Keys, priorities); err != nil {
		return err
	}
	exp, err := buf.AllExperiences(tensorbuf.ExportBatch) // every transition, [N, 1, ...]
	if err != nil {
		return err
	}
	defer exp[0].Release()
	fmt.Println("sampled", batch.Fields["observation"].Shape(), "exported", exp[0].Reward.Shape()[0] > 0)
	return nil
}

// writeDirectly adds steps without a driver: one batched step of a
// writer's rows per Add, then samples 3-step transitions.
func writeDirectly() error {
	buf, err := tensorbuf.New(tensorbuf.Config{NumEnvs: 2, Capacity: 16, Fields: []tensorbuf.Field{
		{Name: "obs", Role: tensorbuf.Observation, DType: tensorbuf.Float32, Shape: []int{3}}}})
	if err != nil {
		return err
	}
	defer buf.Close()
	w, err := buf.NewWriter() // owns every row
	if err != nil {
		return err
	}
	for t := 0; t < 8; t++ {
		err := w.Add(&tensorbuf.Step{
			StepType:     []tensorbuf.StepType{tensorbuf.Mid, tensorbuf.Mid},
			NextStepType: []tensorbuf.StepType{tensorbuf.Mid, tensorbuf.Mid},
			Reward:       []float32{1, 1},
			Discount:     []float32{1, 1},
			Values:       map[string]*tensor.Dense{"obs": tensor.New(tensor.WithShape(2, 3), tensor.Of(tensor.Float32))},
		})
		if err != nil {
			return err
		}
	}
	tr, err := buf.SampleNStep(4, tensorbuf.NStepOptions{Horizon: 3, DiscountFactor: 0.99})
	if err != nil {
		return err
	}
	defer tr.Release()
	fmt.Println("n-step rewards", tr.Reward.Shape())
	return nil
}

// Collect with a driver and an observer, sample from a table, export; then
// write steps directly. This is the README's example.
func Example_readme() {
	if err := collectAndSample(context.Background()); err != nil {
		log.Fatal(err)
	}
	if err := writeDirectly(); err != nil {
		log.Fatal(err)
	}
	// Output:
	// sampled (256, 8, 4) exported true
	// n-step rewards (4)
}

// saveAndLoad is docs/checkpoints.md's example: a checkpoint written
// atomically and loaded back.
func saveAndLoad(buf *tensorbuf.Buffer, dir string) error {
	path := filepath.Join(dir, "replay.ckpt")
	if err := buf.SaveFile(path, tensorbuf.SaveOptions{Compress: true}); err != nil { // temp file, sync, rename
		return err
	}
	loaded, err := tensorbuf.LoadFile(path, tensorbuf.LoadOptions{}) // any backend loads any checkpoint
	if err != nil {
		return err
	}
	defer loaded.Close()
	fmt.Println("steps in row 0:", loaded.Cursor(0))
	return nil
}

// Save a buffer to a file and load it back.
func Example_checkpoint() {
	dir, err := os.MkdirTemp("", "trajring-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	b := exampleBuffer()
	defer b.Close()
	if err := saveAndLoad(b, dir); err != nil {
		log.Fatal(err)
	}
	// Output:
	// steps in row 0: 4
}
