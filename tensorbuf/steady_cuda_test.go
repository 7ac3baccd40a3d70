//go:build trajring_cuda

package tensorbuf

import (
	"context"
	"math/rand/v2"
	"testing"

	"github.com/trajring/trajring/gpu"
)

// TestSteadyStateMakesNoDeviceWideCalls: once warm, a training loop's
// calls on the gpu backend (Add, Insert evicting the oldest item, a
// device-selected prioritized SampleInto into one of 10 batches in turn,
// more than the backend caches column descriptors for, and
// UpdatePrioritiesDevice of the batch's keys) allocate and free no device or pinned memory and sync no
// stream or context: on a real driver each of those serialises every
// stream of the context and stalls a concurrent learner. (Event waits are
// not counted: the stand-in runs queued work only when something waits,
// so reusing a staging slot waits on it, where a GPU has long finished.)
func TestSteadyStateMakesNoDeviceWideCalls(t *testing.T) {
	if _, ok := gpu.CurrentStandinCounts(); !ok {
		t.Skip("needs the stand-in driver's call counts")
	}
	g := newGPU(t)
	b, w := newDevBuffer(t, g, devLowDim, 2, 64)
	tbl, err := b.NewTable(TableConfig{Name: "p", Selector: Prioritized, DeviceSelection: true, MaxSize: 16, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 1))
	prios := deviceTensor(t, g, []float32{0.5, 1, 2, 4})
	bts := make([]*Batch, 10)
	for i := range bts {
		bts[i] = new(Batch)
		defer bts[i].Release()
	}
	const warm, steady = 100, 200
	var before gpu.StandinCounts
	for i := range warm + steady {
		if i == warm {
			before, _ = gpu.CurrentStandinCounts()
		}
		s := randomStep(rng, devLowDim, nil, 2)
		for j := range s.StepType {
			s.StepType[j], s.NextStepType[j] = Mid, Mid
		}
		if err := w.Add(s); err != nil {
			t.Fatal(err)
		}
		if _, err := tbl.Insert(Item{Row: i % 2, Start: b.Cursor(i%2) - 1, Len: 1, Priority: 1}); err != nil {
			t.Fatal(err)
		}
		bt := bts[i%len(bts)]
		if err := tbl.SampleInto(context.Background(), bt, 4); err != nil {
			t.Fatal(err)
		}
		if err := tbl.UpdatePrioritiesDevice(bt.KeyTensor, prios); err != nil {
			t.Fatal(err)
		}
	}
	after, _ := gpu.CurrentStandinCounts()
	got := gpu.StandinCounts{Allocs: after.Allocs - before.Allocs, Frees: after.Frees - before.Frees,
		HostAllocs: after.HostAllocs - before.HostAllocs, HostFrees: after.HostFrees - before.HostFrees,
		StreamSyncs: after.StreamSyncs - before.StreamSyncs, CtxSyncs: after.CtxSyncs - before.CtxSyncs}
	if got != (gpu.StandinCounts{}) {
		t.Errorf("%d steady-state rounds of Add, Insert, SampleInto and UpdatePrioritiesDevice: %+v, want none", steady, got)
	}
}
