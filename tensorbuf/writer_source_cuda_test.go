//go:build trajring_cuda

package tensorbuf

import (
	"bytes"
	"math/rand/v2"
	"testing"
	"unsafe"

	"github.com/trajring/trajring/gpu"
	"gorgonia.org/tensor"
)

// sourceStep returns a copy of s whose field tensors live in memory from
// g.AllocSource, and that memory per field.
func sourceStep(t testing.TB, g *gpu.Backend, fields []Field, s *Step) (*Step, map[string][]byte) {
	t.Helper()
	ps := *s
	ps.Values = map[string]*tensor.Dense{}
	mem := map[string][]byte{}
	for _, f := range fields {
		src := s.Values[f.Name]
		m, err := g.AllocSource(int64(len(src.Header.Raw)))
		if err != nil {
			t.Fatal(err)
		}
		copy(m, src.Header.Raw)
		ps.Values[f.Name] = tensor.New(tensor.Of(f.DType.Tensor()), tensor.WithShape(src.Shape().Clone()...),
			tensor.FromMemory(uintptr(unsafe.Pointer(&m[0])), uintptr(len(m))))
		mem[f.Name] = m
	}
	return &ps, mem
}

// TestAddFromAllocSource: steps whose fields lie in AllocSource memory
// are stored byte for byte as the same steps from Go memory, across ring
// wrap-around, when the producer waits for an event recorded after each
// Add before writing the next step into the same memory; and the Add
// copies nothing on the host: on the stand-in, which runs queued work
// only when something waits, bytes written into the source after Add and
// before the wait are what the ring holds (a real device may have read
// either), while Go memory is copied at the call.
func TestAddFromAllocSource(t *testing.T) {
	const envs, capacity, steps = 6, 4, 11
	for _, fields := range [][]Field{devLowDim, devPixels} {
		g := newGPU(t)
		pinned, pw := newDevBuffer(t, g, fields, envs, capacity)
		plain, gw := newDevBuffer(t, g, fields, envs, capacity)
		ev, err := g.NewEvent()
		if err != nil {
			t.Fatal(err)
		}
		rng := rand.New(rand.NewPCG(7, 9))
		rows := []int{0, 1, 2, 3, 4, 5}
		var ps *Step
		var mem map[string][]byte
		for k := range steps {
			s := randomStep(rng, fields, rows, envs)
			if ps == nil {
				ps, mem = sourceStep(t, g, fields, s)
			} else {
				for _, f := range fields {
					copy(mem[f.Name], s.Values[f.Name].Header.Raw)
				}
				ps.StepType, ps.NextStepType, ps.Reward, ps.Discount = s.StepType, s.NextStepType, s.Reward, s.Discount
			}
			if err := pw.Add(ps); err != nil {
				t.Fatal(err)
			}
			if err := gw.Add(s); err != nil {
				t.Fatal(err)
			}
			if err := g.Record(ev); err != nil {
				t.Fatal(err)
			}
			if err := ev.(*gpu.Event).Synchronize(); err != nil {
				t.Fatalf("step %d: %v", k, err)
			}
		}
		a, b := ringBytes(t, pinned), ringBytes(t, plain)
		for i := range a {
			if !bytes.Equal(a[i], b[i]) {
				t.Fatalf("%s: ring arena %d differs between AllocSource and Go-memory adds", fields[0].Name, i)
			}
		}
		if _, standin := gpu.StandinDeviceTime(); !standin {
			continue
		}
		// Written after Add, before anything waited: the ring gets it.
		s := randomStep(rng, fields, rows, envs)
		for _, f := range fields {
			copy(mem[f.Name], s.Values[f.Name].Header.Raw)
		}
		ps.StepType, ps.NextStepType, ps.Reward, ps.Discount = s.StepType, s.NextStepType, s.Reward, s.Discount
		if err := pw.Add(ps); err != nil {
			t.Fatal(err)
		}
		later := randomStep(rng, fields, rows, envs)
		for _, f := range fields {
			copy(mem[f.Name], later.Values[f.Name].Header.Raw)
		}
		s.Values = later.Values
		if err := gw.Add(s); err != nil {
			t.Fatal(err)
		}
		a, b = ringBytes(t, pinned), ringBytes(t, plain)
		for i := range a {
			if !bytes.Equal(a[i], b[i]) {
				t.Fatalf("%s: ring arena %d: the AllocSource add did not read its source when the device ran", fields[0].Name, i)
			}
		}
	}
}
