//go:build trajring_cuda

package tensorbuf

import (
	"context"
	"errors"
	"math/rand/v2"
	"slices"
	"testing"
	"unsafe"

	"github.com/trajring/trajring/cpu"
	"github.com/trajring/trajring/gpu"
	"gorgonia.org/cu"
)

// prioTable returns a prioritized DeviceSelection table on be over a
// buffer of 2 rows with 4 steps each, holding n items of priority 1
// (their keys), with its device mirror made by a first sample.
func prioTable(t *testing.T, be Backend, n int) (*Table, []uint64) {
	t.Helper()
	b, w := newDevBuffer(t, be, devLowDim, 2, 16)
	tbl, err := b.NewTable(TableConfig{Name: "p", Selector: Prioritized, DeviceSelection: true, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 1))
	for range 4 {
		s := randomStep(rng, devLowDim, nil, 2)
		for i := range s.StepType {
			s.StepType[i], s.NextStepType[i] = Mid, Mid
		}
		if err := w.Add(s); err != nil {
			t.Fatal(err)
		}
	}
	keys := make([]uint64, n)
	for i := range keys {
		if keys[i], err = tbl.Insert(Item{Row: i % 2, Start: int64(i / 2), Len: 1, Priority: 1}); err != nil {
			t.Fatal(err)
		}
	}
	bt := new(Batch)
	t.Cleanup(func() { _ = bt.Release() })
	if err := tbl.SampleInto(context.Background(), bt, 2); err != nil {
		t.Fatal(err)
	}
	return tbl, keys
}

// TestUpdatePrioritiesDeviceAfterOrdersALearner plays a learner that
// writes its TD errors on its own stream and hands them to
// UpdatePrioritiesDeviceAfter with the event recorded after the write,
// then waits for the update's done event before it overwrites them: the
// table learns exactly the priorities written. The negative controls
// show what each event guards on the stand-in, whose streams run in an
// adversarial order (on a GPU these races may go either way): without
// the learner's event the update reads the tensor before the write
// lands (the arena's zeros), and a learner that does not wait for done
// overwrites the priorities before the update reads them.
func TestUpdatePrioritiesDeviceAfterOrdersALearner(t *testing.T) {
	const n = 8
	good := []float32{0.5, 1.5, 2.5, 3.5, 4.5, 5.5, 6.5, 7.5}
	bad := []float32{9, 9, 9, 9, 9, 9, 9, 9}
	cases := []struct {
		name                  string
		giveWritten, waitDone bool
		want                  []float32
	}{
		{"both events", true, true, good},
		{"no learner event", false, true, make([]float32, n)},
		{"learner does not wait for done", true, false, bad},
	}
	_, standin := gpu.StandinDeviceTime()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if !c.giveWritten || !c.waitDone {
				if !standin {
					t.Skip("a race: on a GPU it may go either way")
				}
			}
			g := newGPU(t)
			tbl, keys := prioTable(t, g, n)
			kd := deviceTensor(t, g, keys)
			pd := deviceTensor(t, g, make([]float32, n))
			gd, bd := deviceTensor(t, g, good), deviceTensor(t, g, bad)
			done, err := g.NewEvent()
			if err != nil {
				t.Fatal(err)
			}
			defer done.Close()
			if err := g.Sync(); err != nil {
				t.Fatal(err)
			}

			usePrimaryContext(t)
			ls, err := cu.MakeStream(cu.NonBlocking)
			if err != nil {
				t.Fatal(err)
			}
			defer ls.Destroy()
			written, err := cu.MakeEvent(cu.DisableTiming)
			if err != nil {
				t.Fatal(err)
			}
			defer cu.DestroyEvent(&written)
			bytes := int64(4 * n)
			// The learner writes its TD errors, then the update reads them.
			if err := cu.MemcpyDtoDAsync(cu.DevicePtr(pd.Uintptr()), cu.DevicePtr(gd.Uintptr()), bytes, ls); err != nil {
				t.Fatal(err)
			}
			if err := written.Record(ls); err != nil {
				t.Fatal(err)
			}
			var wh uintptr
			if c.giveWritten {
				wh = *(*uintptr)(unsafe.Pointer(&written))
			}
			if err := tbl.UpdatePrioritiesDeviceAfter(kd, pd, wh, done); err != nil {
				t.Fatal(err)
			}
			if c.waitDone {
				h := done.Handle()
				if err := ls.Wait(*(*cu.Event)(unsafe.Pointer(&h)), 0); err != nil {
					t.Fatal(err)
				}
			}
			// The learner's next step overwrites them.
			if err := cu.MemcpyDtoDAsync(cu.DevicePtr(pd.Uintptr()), cu.DevicePtr(bd.Uintptr()), bytes, ls); err != nil {
				t.Fatal(err)
			}
			if err := ls.Synchronize(); err != nil {
				t.Fatal(err)
			}
			if err := g.Sync(); err != nil {
				t.Fatal(err)
			}
			tbl.mu.Lock()
			defer tbl.mu.Unlock()
			if err := tbl.learnLeavesLocked(); err != nil {
				t.Fatal(err)
			}
			got := make([]float32, n)
			for i, k := range keys {
				s, ok := tbl.lookup(k)
				if !ok {
					t.Fatal("item gone")
				}
				got[i] = float32(tbl.items[s].Priority)
			}
			if !slices.Equal(got, c.want) {
				t.Errorf("priorities %v, want %v", got, c.want)
			}
		})
	}
}

// TestUpdatePrioritiesDeviceAfterRefusals: an event of another backend,
// a closed event, or events given on the cpu backend fail with
// ErrInvalidArg and change nothing (no update epoch is used).
func TestUpdatePrioritiesDeviceAfterRefusals(t *testing.T) {
	g, other := newGPU(t), newGPU(t)
	foreign, err := other.NewEvent()
	if err != nil {
		t.Fatal(err)
	}
	defer foreign.Close()
	closed, err := g.NewEvent()
	if err != nil {
		t.Fatal(err)
	}
	if err := closed.Close(); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name    string
		be      Backend
		written uintptr
		done    Event
	}{
		{"event of another backend", g, 0, foreign},
		{"closed event", g, 0, closed},
		{"learner event on the cpu backend", nil, 1, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			be := c.be
			if be == nil {
				be = cpu.New()
			}
			tbl, keys := prioTable(t, be, 1)
			k := keys[0]
			kd := deviceTensor(t, be, []uint64{k})
			pd := deviceTensor(t, be, []float32{3})
			err := tbl.UpdatePrioritiesDeviceAfter(kd, pd, c.written, c.done)
			if !errors.Is(err, ErrInvalidArg) {
				t.Fatalf("got %v, want ErrInvalidArg", err)
			}
			if tbl.dev.epoch != 0 || tbl.dev.devSet {
				t.Errorf("a refused call changed the mirror: epoch %d, device priorities set %v", tbl.dev.epoch, tbl.dev.devSet)
			}
		})
	}
}
