package tensorbuf_test

import (
	"context"
	"fmt"
	"log"

	"github.com/trajring/trajring/tensorbuf"
)

// learner is what a training loop on a GPU provides for feedLearner: Step
// makes its stream wait for ready (cuStreamWaitEvent on ready.Handle()),
// queues its kernels reading bt, and returns the CUevent it recorded after
// its last read of bt (0 once it has synchronised, as a host learner has).
type learner interface {
	Step(bt *tensorbuf.Batch, ready tensorbuf.Event) (done uintptr, err error)
}

// feedLearner hands a learner steps double-buffered batches of 256 items
// from table: the gather of the next batch runs while the learner reads
// this one, ordered by events on the device, with no host sync.
func feedLearner(ctx context.Context, table *tensorbuf.Table, l learner, steps int) error {
	src, err := tensorbuf.NewBatchSource(table, 256, 2) // double buffered
	if err != nil {
		return err
	}
	defer src.Close()
	for i := 0; i < steps; i++ {
		bt, ready, err := src.Next(ctx) // gather queued; ready recorded after it
		if err != nil {
			return err
		}
		done, err := l.Step(bt, ready)
		if err != nil {
			return err
		}
		if err := src.Done(bt, done); err != nil { // the gather that reuses bt waits for done
			return err
		}
	}
	return nil
}

// hostLearner counts the valid steps it is handed, from a host copy of
// the batch (the batch itself is device memory on the gpu backend): the
// copy waits for the gather, and the batch is free once Step returns.
type hostLearner struct{ steps int }

func (h *hostLearner) Step(bt *tensorbuf.Batch, ready tensorbuf.Event) (uintptr, error) {
	host, err := bt.Host()
	if err != nil {
		return 0, err
	}
	defer host.Release()
	for _, valid := range host.Mask.Data().([]bool) {
		if valid {
			h.steps++
		}
	}
	return 0, nil
}

// A learner fed by a BatchSource: the README's CUDA section shows
// feedLearner.
func ExampleBatchSource() {
	b := exampleBuffer()
	defer b.Close()
	table, err := b.NewTable(tensorbuf.TableConfig{Name: "replay", Selector: tensorbuf.Uniform})
	if err != nil {
		log.Fatal(err)
	}
	if _, err := table.Insert(tensorbuf.Item{Row: 0, Start: 0, Len: 2, Priority: 1}); err != nil {
		log.Fatal(err)
	}
	var l hostLearner
	if err := feedLearner(context.Background(), table, &l, 3); err != nil {
		log.Fatal(err)
	}
	fmt.Println("valid steps read:", l.steps)
	// Output:
	// valid steps read: 1536
}
