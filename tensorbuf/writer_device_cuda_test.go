//go:build trajring_cuda

package tensorbuf

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"runtime"
	"slices"
	"testing"
	"unsafe"

	"github.com/trajring/trajring/cpu"
	"github.com/trajring/trajring/gpu"
	"gorgonia.org/cu"
	"gorgonia.org/tensor"
)

// Writer.Add from device tensors on the gpu backend (the stand-in driver
// in CI, which kills the process on any host read of device memory, so a
// host read of a device source fails these tests by itself).

var (
	devLowDim = []Field{
		{Name: "obs", Role: Observation, DType: Float32, Shape: []int{8}},
		{Name: "act", Role: Action, DType: Int64},
	}
	devPixels = []Field{
		{Name: "pix", Role: Observation, DType: Uint8, Shape: []int{3072}},
		{Name: "act", Role: Action, DType: Int64},
	}
)

func newGPU(t testing.TB) *gpu.Backend {
	t.Helper()
	g, err := gpu.New()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = g.Close() })
	return g
}

func newDevBuffer(t testing.TB, be Backend, fields []Field, envs, capacity int) (*Buffer, *Writer) {
	t.Helper()
	b, err := New(Config{NumEnvs: envs, Capacity: capacity, Fields: fields, Seed: 3, Backend: be})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	w, err := b.NewWriter()
	if err != nil {
		t.Fatal(err)
	}
	return b, w
}

// devSource is a device tensor of one field over an arena of the gpu
// backend, off bytes into it, with guard bytes after it.
type devSource struct {
	arena Arena
	off   int64
	t     *tensor.Dense
}

func newDevSource(t testing.TB, g *gpu.Backend, f Field, n int, off int64) devSource {
	t.Helper()
	size := off + int64(n)*int64(f.StepBytes())
	a, err := g.Alloc(size + 16)
	if err != nil {
		t.Fatal(err)
	}
	d, err := g.Tensor(a, off, f.DType.Tensor(), append([]int{n}, f.Shape...)...)
	if err != nil {
		t.Fatal(err)
	}
	return devSource{arena: a, off: off, t: d}
}

// randomStep fills a host step of n rows of fields with random values.
func randomStep(rng *rand.Rand, fields []Field, rows []int, n int) *Step {
	s := &Step{Rows: rows, StepType: make([]StepType, n), NextStepType: make([]StepType, n),
		Reward: make([]float32, n), Discount: make([]float32, n), Values: map[string]*tensor.Dense{}}
	types := []StepType{First, Mid, Mid, Last}
	for i := range n {
		s.StepType[i], s.NextStepType[i] = types[rng.IntN(4)], types[rng.IntN(4)]
		s.Reward[i] = float32(rng.NormFloat64())
		s.Discount[i] = []float32{0, 0.5, 1}[rng.IntN(3)]
	}
	for _, f := range fields {
		d := tensor.New(tensor.Of(f.DType.Tensor()), tensor.WithShape(append([]int{n}, f.Shape...)...))
		for i := range d.Header.Raw {
			d.Header.Raw[i] = byte(rng.Uint32())
		}
		s.Values[f.Name] = d
	}
	return s
}

// ringBytes downloads every ring arena of b.
func ringBytes(t testing.TB, b *Buffer) [][]byte {
	t.Helper()
	out := make([][]byte, len(b.arenas))
	for i, ra := range b.arenas {
		out[i] = make([]byte, ra.arena.Size())
		if err := b.be.Download(out[i], ra.arena, 0); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

func cursors(b *Buffer) []int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.cursor)
}

// transitionBytes returns the bytes of every tensor of host transitions,
// in a fixed order.
func transitionBytes(tr *Transitions) [][]byte {
	var out [][]byte
	for _, m := range []map[string]*tensor.Dense{tr.Observation, tr.Action, tr.PolicyInfo, tr.NextObservation} {
		for _, k := range sortedKeys(m) {
			out = append(out, m[k].Header.Raw)
		}
	}
	for _, d := range []*tensor.Dense{tr.Reward, tr.Discount, tr.IsDone} {
		out = append(out, d.Header.Raw)
	}
	return out
}

// TestAddFromDeviceMatchesHost: adding steps whose fields are device
// tensors of the buffer's backend (all of them, or mixed with host
// tensors; all rows or a partial add in another order; sources at
// unaligned offsets) leaves the rings, cursors and stats byte for byte as
// adding the same values from host tensors does, across ring wrap-around,
// and samples the same transitions; the device sources and their guard
// bytes are not written.
func TestAddFromDeviceMatchesHost(t *testing.T) {
	const envs, capacity, steps = 6, 4, 11
	for _, tc := range []struct {
		name   string
		fields []Field
		rows   []int
		device []string         // fields given as device tensors
		offs   map[string]int64 // byte offset of a device source in its arena
	}{
		{"low-dim, all on the device", devLowDim, nil, []string{"obs", "act"}, nil},
		{"3KB, all on the device", devPixels, nil, []string{"pix", "act"}, nil},
		{"mixed: obs on the device, act on the host", devLowDim, nil, []string{"obs"}, nil},
		{"mixed: act on the device, pixels on the host", devPixels, nil, []string{"act"}, nil},
		{"partial add, rows out of order", devLowDim, []int{5, 2, 0}, []string{"obs", "act"}, nil},
		{"unaligned sources", devPixels, []int{4, 1}, []string{"pix", "act"}, map[string]int64{"pix": 1, "act": 8}},
		{"unaligned low-dim", devLowDim, nil, []string{"obs", "act"}, map[string]int64{"obs": 4, "act": 24}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			gh, gd := newGPU(t), newGPU(t)
			bh, wh := newDevBuffer(t, gh, tc.fields, envs, capacity)
			bd, wd := newDevBuffer(t, gd, tc.fields, envs, capacity)
			n := envs
			if tc.rows != nil {
				n = len(tc.rows)
			}
			srcs := map[string]devSource{}
			for _, f := range tc.fields {
				if slices.Contains(tc.device, f.Name) {
					srcs[f.Name] = newDevSource(t, gd, f, n, tc.offs[f.Name])
				}
			}
			rng := rand.New(rand.NewPCG(5, uint64(len(tc.name))))
			for k := range steps {
				hs := randomStep(rng, tc.fields, tc.rows, n)
				ds := *hs
				ds.Values = map[string]*tensor.Dense{}
				for name, d := range hs.Values {
					src, ok := srcs[name]
					if !ok {
						ds.Values[name] = d
						continue
					}
					// Queued on the backend's stream: the scatter reads it after.
					if err := gd.Upload(src.arena, src.off, d.Header.Raw); err != nil {
						t.Fatal(err)
					}
					ds.Values[name] = src.t
				}
				if err := wh.Add(hs); err != nil {
					t.Fatalf("step %d: host Add: %v", k, err)
				}
				if err := wd.Add(&ds); err != nil {
					t.Fatalf("step %d: device Add: %v", k, err)
				}
				// The sources are rewritten next step on the same stream,
				// after this scatter: nothing to wait for.
			}
			for i, want := range ringBytes(t, bh) {
				if got := ringBytes(t, bd)[i]; !bytes.Equal(got, want) {
					t.Fatalf("ring arena %d differs", i)
				}
			}
			if got, want := cursors(bd), cursors(bh); !slices.Equal(got, want) {
				t.Fatalf("cursors %v, want %v", got, want)
			}
			if got, want := bd.Stats(), bh.Stats(); got != want {
				t.Fatalf("stats %+v, want %+v", got, want)
			}
			for name, src := range srcs { // the guard bytes after each source
				guard := make([]byte, 16)
				if err := gd.Download(guard, src.arena, src.arena.Size()-16); err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(guard, make([]byte, 16)) {
					t.Fatalf("source %s: guard bytes written: %v", name, guard)
				}
			}
			th, td := new(Transitions), new(Transitions)
			defer th.Release()
			defer td.Release()
			for round := range 3 {
				if err := bh.SampleTransitionsInto(th, 16); err != nil {
					t.Fatal(err)
				}
				if err := bd.SampleTransitionsInto(td, 16); err != nil {
					t.Fatal(err)
				}
				hh, err := th.Host()
				if err != nil {
					t.Fatal(err)
				}
				hd, err := td.Host()
				if err != nil {
					t.Fatal(err)
				}
				if !slices.Equal(hh.Rows, hd.Rows) || !slices.Equal(hh.Steps, hd.Steps) {
					t.Fatalf("round %d: sampled %v/%v, want %v/%v", round, hd.Rows, hd.Steps, hh.Rows, hh.Steps)
				}
				want, got := transitionBytes(hh), transitionBytes(hd)
				for i := range want {
					if !bytes.Equal(got[i], want[i]) {
						t.Fatalf("round %d: sampled tensor %d differs", round, i)
					}
				}
				_ = hh.Release()
				_ = hd.Release()
			}
		})
	}
}

// TestAddFromDeviceRefusals: device tensors the buffer's backend cannot
// read in place, or of the wrong dtype or shape, are refused with a
// sentinel, and the refused Add changes nothing: rings, cursors, stats
// and launches stay as they were.
func TestAddFromDeviceRefusals(t *testing.T) {
	const envs, capacity = 4, 8
	g, other := newGPU(t), newGPU(t)
	b, w := newDevBuffer(t, g, devLowDim, envs, capacity)
	rng := rand.New(rand.NewPCG(9, 9))
	host := randomStep(rng, devLowDim, nil, envs)
	for range 3 {
		if err := w.Add(host); err != nil {
			t.Fatal(err)
		}
	}
	obs := devLowDim[0]
	own := newDevSource(t, g, obs, envs, 0)
	foreign := newDevSource(t, other, obs, envs, 0)
	wrongDType := newDevSource(t, g, Field{Name: "act", DType: Float64}, envs, 0) // 8 bytes a row, as int64
	wrongShape := newDevSource(t, g, Field{Name: "obs", DType: Float32, Shape: []int{4}}, 2*envs, 0)
	fewRows := newDevSource(t, g, obs, envs-1, 0)
	ringView, err := g.Tensor(b.arenas[0].arena, 0, tensor.Float32, envs, 8)
	if err != nil {
		t.Fatal(err)
	}
	// Freed last, so that no later Alloc reuses its memory (a tensor over
	// memory the backend has since given to another live arena cannot be
	// told apart from one made over that arena).
	freed := newDevSource(t, g, obs, envs, 0)
	if err := g.Free(freed.arena); err != nil {
		t.Fatal(err)
	}
	with := func(field string, d *tensor.Dense) *Step {
		s := *host
		s.Values = map[string]*tensor.Dense{"obs": own.t, "act": host.Values["act"]}
		s.Values[field] = d
		return &s
	}
	for _, tc := range []struct {
		name string
		step *Step
		want []error
	}{
		{"another backend's device tensor", with("obs", foreign.t), []error{ErrForeignTensor, ErrDeviceTensor, ErrInvalidArg}},
		{"a freed arena", with("obs", freed.t), []error{ErrForeignTensor, ErrDeviceTensor, ErrInvalidArg}},
		{"wrong dtype", with("act", wrongDType.t), []error{ErrDType}},
		{"wrong shape", with("obs", wrongShape.t), []error{ErrShape}},
		{"too few rows", with("obs", fewRows.t), []error{ErrShape}},
		{"the ring it writes", with("obs", ringView), []error{ErrBackend}},
	} {
		beforeRing, beforeCur, beforeStats, beforeLaunches := ringBytes(t, b), cursors(b), b.Stats(), g.Launches()
		err := w.Add(tc.step)
		for _, want := range tc.want {
			if !errors.Is(err, want) {
				t.Errorf("%s: Add: %v, want %v", tc.name, err, want)
			}
		}
		if got := g.Launches(); got != beforeLaunches {
			t.Errorf("%s: a refused Add launched %d kernels", tc.name, got-beforeLaunches)
		}
		for i, r := range ringBytes(t, b) {
			if !bytes.Equal(r, beforeRing[i]) {
				t.Errorf("%s: a refused Add changed ring arena %d", tc.name, i)
			}
		}
		if got := cursors(b); !slices.Equal(got, beforeCur) || b.Stats() != beforeStats {
			t.Errorf("%s: a refused Add changed cursors %v -> %v, stats %+v -> %+v", tc.name, beforeCur, got, beforeStats, b.Stats())
		}
	}

	// A cpu-backed buffer reads no device memory.
	cb, cw := newDevBuffer(t, cpu.New(), devLowDim, envs, capacity)
	if err := cw.Add(with("obs", own.t)); !errors.Is(err, ErrForeignTensor) || !errors.Is(err, ErrDeviceTensor) {
		t.Fatalf("cpu-backed Add of a device tensor: %v, want ErrForeignTensor", err)
	}
	if cb.Size() != 0 {
		t.Fatalf("a refused Add wrote %d steps", cb.Size())
	}
}

// TestAddFromDeviceAllocatesNothing: in steady state an Add from device
// tensors allocates nothing, as an Add from host tensors does.
func TestAddFromDeviceAllocatesNothing(t *testing.T) {
	g := newGPU(t)
	_, w := newDevBuffer(t, g, devPixels, 16, 8)
	rng := rand.New(rand.NewPCG(1, 1))
	s := randomStep(rng, devPixels, nil, 16)
	s.Values["pix"] = newDevSource(t, g, devPixels[0], 16, 0).t
	s.Values["act"] = newDevSource(t, g, devPixels[1], 16, 0).t
	for range 10 {
		if err := w.Add(s); err != nil {
			t.Fatal(err)
		}
	}
	if n := testing.AllocsPerRun(50, func() {
		if err := w.Add(s); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Fatalf("Add from device tensors: %v allocations per call", n)
	}
}

// TestAddFromDeviceWaitsForProducerStream: a producer that writes its step
// on its own stream, records an event after the write and makes the
// backend's stream wait for it (Streamer.WaitHandle) before Add, and waits
// on an event recorded after Add before overwriting its source, gets every
// step into the ring as a host add of the same values does. On the
// stand-in, whose streams run in an adversarial order that honours only
// events (the op issued last first: here the backend's scatter before the
// producer's copy), the same run without
// the wait stores stale bytes: the control shows that the wait matters.
func TestAddFromDeviceWaitsForProducerStream(t *testing.T) {
	const envs, capacity, rounds = 4, 4, 6
	usePrimaryContext(t)
	_, standin := gpu.StandinDeviceTime()
	for _, wait := range []bool{true, false} {
		if !wait && !standin {
			continue // on a GPU the race may go either way
		}
		// The producer's stream is older than the backend's (made first).
		cs, err := cu.MakeStream(cu.NonBlocking)
		if err != nil {
			t.Fatal(err)
		}
		written, err := cu.MakeEvent(cu.DisableTiming)
		if err != nil {
			t.Fatal(err)
		}
		gh, g := newGPU(t), newGPU(t)
		read, err := g.NewEvent()
		if err != nil {
			t.Fatal(err)
		}
		bh, wh := newDevBuffer(t, gh, devLowDim, envs, capacity)
		bd, wd := newDevBuffer(t, g, devLowDim, envs, capacity)
		rng := rand.New(rand.NewPCG(2, 2))
		steps := make([]*Step, rounds)
		for k := range steps {
			steps[k] = randomStep(rng, devLowDim, nil, envs)
		}
		// Every round's observations, on the device before the producer runs.
		obsBytes := int64(envs * devLowDim[0].StepBytes())
		pre, err := g.Alloc(rounds * obsBytes)
		if err != nil {
			t.Fatal(err)
		}
		for k, s := range steps {
			if err := g.Upload(pre, int64(k)*obsBytes, s.Values["obs"].Header.Raw); err != nil {
				t.Fatal(err)
			}
		}
		if err := g.Sync(); err != nil {
			t.Fatal(err)
		}
		src := newDevSource(t, g, devLowDim[0], envs, 0)
		for k, s := range steps {
			if err := wh.Add(s); err != nil {
				t.Fatal(err)
			}
			if err := cu.MemcpyDtoDAsync(src.arena.(*gpu.Arena).Ptr(), pre.(*gpu.Arena).Ptr()+cu.DevicePtr(int64(k)*obsBytes), obsBytes, cs); err != nil {
				t.Fatal(err)
			}
			if err := written.Record(cs); err != nil {
				t.Fatal(err)
			}
			if wait {
				if err := g.WaitHandle(*(*uintptr)(unsafe.Pointer(&written))); err != nil {
					t.Fatal(err)
				}
			}
			ds := *s
			ds.Values = map[string]*tensor.Dense{"obs": src.t, "act": s.Values["act"]}
			if err := wd.Add(&ds); err != nil {
				t.Fatal(err)
			}
			if err := g.Record(read); err != nil {
				t.Fatal(err)
			}
			h := read.Handle()
			if err := cs.Wait(*(*cu.Event)(unsafe.Pointer(&h)), 0); err != nil {
				t.Fatal(err)
			}
		}
		if err := cs.Synchronize(); err != nil {
			t.Fatal(err)
		}
		same := true
		want, got := ringBytes(t, bh), ringBytes(t, bd)
		for i := range want {
			same = same && bytes.Equal(got[i], want[i])
		}
		if same != wait {
			t.Errorf("wait %v: rings equal %v, want %v", wait, same, wait)
		}
		_ = read.Close()
		_ = cu.DestroyEvent(&written)
		_ = cs.Destroy()
	}
}

// usePrimaryContext locks the test's goroutine to its thread and makes the
// device's primary context current there, as a consumer using the driver
// API on its own thread does (cudart-based code is in it already); the
// test's cleanup releases both.
func usePrimaryContext(t *testing.T) {
	t.Helper()
	runtime.LockOSThread()
	t.Cleanup(runtime.UnlockOSThread)
	dev, err := cu.GetDevice(0)
	if err != nil {
		t.Fatal(err)
	}
	pctx, err := dev.RetainPrimaryCtx()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = dev.ReleasePrimaryCtx() })
	if err := cu.SetCurrentContext(pctx); err != nil {
		t.Fatal(err)
	}
}
