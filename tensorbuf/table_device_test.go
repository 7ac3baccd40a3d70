package tensorbuf_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"testing"
	"unsafe"

	"github.com/trajring/trajring/cpu"
	"github.com/trajring/trajring/tensorbuf"
	"gorgonia.org/tensor"
)

// devSample is what one sample call returned, in host memory.
type devSample struct {
	keys       []uint64
	items      []tensorbuf.Item
	probs, wts []float64
	size       int
	n, l       int
	fields     map[string][]byte
}

// devScenario runs a seeded sequence of adds (evicting items once rows
// wrap), inserts, deletes and samples on a buffer of backend be with a
// uniform table of the given seed and max size, selecting on the backend
// when dev is set, and returns every sample. Every item has Len+Pad = 4,
// so the host's L (longest drawn) equals the device path's (longest
// inserted).
func devScenario(t *testing.T, be tensorbuf.Backend, dev bool, seed uint64, maxSize, rounds, n int) []devSample {
	t.Helper()
	return devScenarioOf(t, be, dev, devOpts{cfg: tensorbuf.TableConfig{Seed: seed, MaxSize: maxSize}, rounds: rounds, n: n})
}

// devOpts configure devScenarioOf: the table (Name and DeviceSelection
// are set by it), the rounds and the batch size, and for prioritized
// tables whether priorities are updated after each sample (on the host,
// or with UpdatePrioritiesDevice from tensors in backend memory when
// selecting on the backend, plus a stale key the host would refuse).
type devOpts struct {
	cfg     tensorbuf.TableConfig
	rounds  int
	n       int
	updates bool
}

// devScenarioOf is devScenario for any table; prioritized items get
// random priorities (some 0).
func devScenarioOf(t *testing.T, be tensorbuf.Backend, dev bool, o devOpts) []devSample {
	t.Helper()
	seed, rounds, n := o.cfg.Seed, o.rounds, o.n
	const envs, capacity, span = 3, 16, 4
	b, err := tensorbuf.New(tensorbuf.Config{NumEnvs: envs, Capacity: capacity, Fields: testFields, Seed: 1, Backend: be})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	w, err := b.NewWriter()
	if err != nil {
		t.Fatal(err)
	}
	cfg := o.cfg
	cfg.Name, cfg.DeviceSelection = "t", dev
	tbl, err := b.NewTable(cfg)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(seed, 99))
	m := newModel(envs, capacity)
	ad := &adder{t: t, m: m, w: w}
	rows := []int{0, 1, 2}
	var keys []uint64
	var out []devSample
	bt := new(tensorbuf.Batch)
	defer bt.Release()
	for round := range rounds {
		ad.add(rows, mids(envs, float32(round)))
		for range rng.IntN(6) {
			r := rng.IntN(envs)
			ln := 1 + rng.IntN(span)
			lo, hi := m.oldest(r), m.cursor(r)-int64(ln)
			if hi < lo {
				continue
			}
			prio := 1.0
			if cfg.Selector == tensorbuf.Prioritized && rng.IntN(6) > 0 {
				prio = float64(rng.IntN(4)) + rng.Float64()
			}
			k, err := tbl.Insert(tensorbuf.Item{Row: r, Start: lo + rng.Int64N(hi-lo+1), Len: ln, Pad: span - ln, Priority: prio})
			if err != nil {
				t.Fatal(err)
			}
			keys = append(keys, k)
		}
		if len(keys) > 0 && rng.IntN(3) == 0 {
			tbl.Delete(keys[rng.IntN(len(keys))])
		}
		if tbl.Size() == 0 {
			continue
		}
		if err := tbl.SampleInto(context.Background(), bt, n); err != nil {
			t.Fatal(err)
		}
		hb, err := bt.Host()
		if err != nil {
			t.Fatal(err)
		}
		s := devSample{keys: hb.Keys, items: hb.Items, probs: hb.Probabilities, wts: hb.Weights, size: hb.TableSize, fields: map[string][]byte{}}
		s.n, s.l = hb.Len()
		for name, d := range hb.Fields {
			s.fields[name] = rawBytes(d)
		}
		for name, d := range map[string]*tensor.Dense{"step_type": hb.StepType, "next_step_type": hb.NextStepType, "reward": hb.Reward, "discount": hb.Discount, "mask": hb.Mask} {
			s.fields[name] = rawBytes(d)
		}
		_ = hb.Release()
		out = append(out, s)
		if o.updates {
			ps := make([]float32, len(s.keys))
			for i := range ps {
				ps[i] = float32(rng.IntN(5)) * 0.75
			}
			if !dev {
				if err := tbl.UpdatePriorities32(s.keys, ps); err != nil {
					t.Fatal(err)
				}
				continue
			}
			// The batch's own key tensor, and a copy with a stale key
			// (deleted, or of a slot's older generation) appended.
			keys, prios := bt.KeyTensor, backendTensor(t, be, tensor.Float32, ps)
			if round%2 == 1 {
				keys = backendTensor(t, be, tensor.Uint64, append(s.keys, s.keys[0]+1<<32))
				prios = backendTensor(t, be, tensor.Float32, append(ps, 3))
			}
			if err := tbl.UpdatePrioritiesDevice(keys, prios); err != nil {
				t.Fatal(err)
			}
		}
	}
	return out
}

// backendTensor returns a tensor of backend memory holding vals (the
// arena is freed when the test ends).
func backendTensor[T uint64 | float32](t *testing.T, be tensorbuf.Backend, dt tensor.Dtype, vals []T) *tensor.Dense {
	t.Helper()
	n := len(vals) * int(dt.Size())
	a, err := be.Alloc(int64(n))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = be.Free(a) })
	if err := be.Upload(a, 0, unsafe.Slice((*byte)(unsafe.Pointer(&vals[0])), n)); err != nil {
		t.Fatal(err)
	}
	d, err := be.Tensor(a, 0, dt, len(vals))
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// rawBytes returns a copy of a host tensor's bytes.
func rawBytes(d *tensor.Dense) []byte {
	return bytes.Clone(d.Header.Raw)
}

// TestDeviceSelectionMatchesHost: a DeviceSelection table on the default
// backend (the gpu backend on the stand-in in cuda builds) returns
// exactly the keys, probabilities, weights and bytes of every field and
// the mask of the same table selecting on the host of a cpu backend,
// through adds that evict, inserts into a full table and deletes (so the
// live list's order matters), over several calls.
func TestDeviceSelectionMatchesHost(t *testing.T) {
	def, err := tensorbuf.DefaultBackend()
	if err != nil {
		t.Skip(err)
	}
	t.Logf("device selection on the %s backend", def.Name())
	for _, tc := range []struct {
		seed            uint64
		maxSize, rounds int
		n               int
		wantMinSamples  int
	}{
		{seed: 1, maxSize: 0, rounds: 40, n: 7, wantMinSamples: 30},
		{seed: 2, maxSize: 5, rounds: 40, n: 16, wantMinSamples: 30},
		{seed: 3, maxSize: 0, rounds: 60, n: 1, wantMinSamples: 50},
		{seed: 1 << 40, maxSize: 12, rounds: 50, n: 33, wantMinSamples: 40},
	} {
		t.Run(fmt.Sprintf("seed%d/max%d/n%d", tc.seed, tc.maxSize, tc.n), func(t *testing.T) {
			want := devScenario(t, cpu.New(), false, tc.seed, tc.maxSize, tc.rounds, tc.n)
			got := devScenario(t, def, true, tc.seed, tc.maxSize, tc.rounds, tc.n)
			if len(got) != len(want) || len(want) < tc.wantMinSamples {
				t.Fatalf("%d samples, want %d (at least %d)", len(got), len(want), tc.wantMinSamples)
			}
			for i := range want {
				g, w := got[i], want[i]
				if !reflect.DeepEqual(g.items, w.items) {
					t.Fatalf("sample %d: items %+v\nwant %+v", i, g.items, w.items)
				}
				if g.n != w.n || g.l != w.l || g.size != w.size || !reflect.DeepEqual(g.keys, w.keys) ||
					!reflect.DeepEqual(g.probs, w.probs) || !reflect.DeepEqual(g.wts, w.wts) {
					t.Fatalf("sample %d: n %d l %d size %d keys %v probs %v weights %v\nwant n %d l %d size %d keys %v probs %v weights %v",
						i, g.n, g.l, g.size, g.keys, g.probs, g.wts, w.n, w.l, w.size, w.keys, w.probs, w.wts)
				}
				for name, wb := range w.fields {
					if !bytes.Equal(g.fields[name], wb) {
						t.Fatalf("sample %d: field %s differs:\n got %v\nwant %v", i, name, g.fields[name], wb)
					}
				}
			}
		})
	}
}

// TestDevicePrioritizedMatchesHost: a prioritized DeviceSelection table
// on the default backend selects exactly the items of the same table
// selecting on the host of a cpu backend (keys, probabilities, every
// field), with random priorities (zeros among them), priority exponents,
// inserts into a full table, deletes and evictions, through priority
// updates after every sample: on the host with UpdatePriorities32, on the
// device with UpdatePrioritiesDevice from the batch's KeyTensor (and from
// tensors with a stale key, which it skips). Importance weights (Beta >
// 0) agree exactly on the cpu backend and within a relative 1e-13 on the
// gpu backend (the device's pow). Device updates with an exponent other
// than 1 compute p^a on the device: checked on the cpu backend only.
func TestDevicePrioritizedMatchesHost(t *testing.T) {
	def, err := tensorbuf.DefaultBackend()
	if err != nil {
		t.Skip(err)
	}
	p := tensorbuf.Prioritized
	for _, tc := range []struct {
		name string
		o    devOpts
	}{
		{"beta 0", devOpts{cfg: tensorbuf.TableConfig{Selector: p, Seed: 1}, rounds: 40, n: 9}},
		{"beta 0.4 full", devOpts{cfg: tensorbuf.TableConfig{Selector: p, Seed: 2, Beta: 0.4, MaxSize: 9}, rounds: 40, n: 16}},
		{"a 0.6", devOpts{cfg: tensorbuf.TableConfig{Selector: p, Seed: 3, PriorityExponent: 0.6, Beta: 1}, rounds: 50, n: 5}},
		{"device updates", devOpts{cfg: tensorbuf.TableConfig{Selector: p, Seed: 4, Beta: 0.5}, rounds: 60, n: 8, updates: true}},
		{"device updates full", devOpts{cfg: tensorbuf.TableConfig{Selector: p, Seed: 5, MaxSize: 6}, rounds: 60, n: 3, updates: true}},
		{"device updates a 2", devOpts{cfg: tensorbuf.TableConfig{Selector: p, Seed: 6, PriorityExponent: 2}, rounds: 40, n: 8, updates: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			exactPow := def.Name() == "cpu"
			if tc.o.updates && tc.o.cfg.PriorityExponent != 0 && tc.o.cfg.PriorityExponent != 1 && !exactPow {
				t.Skip("p^a computed on the device may differ from math.Pow in the last bits")
			}
			want := devScenarioOf(t, cpu.New(), false, tc.o)
			got := devScenarioOf(t, def, true, tc.o)
			if len(got) != len(want) || len(want) < tc.o.rounds/2 {
				t.Fatalf("%d samples, want %d", len(got), len(want))
			}
			for i := range want {
				g, w := got[i], want[i]
				wts := reflect.DeepEqual(g.wts, w.wts)
				if !wts && !exactPow && len(g.wts) == len(w.wts) {
					wts = true
					for k := range g.wts {
						wts = wts && math.Abs(g.wts[k]-w.wts[k]) <= 1e-13*w.wts[k]
					}
				}
				// Items come from the table: with device updates their
				// priorities are the host's, which has not learned them.
				gi, wi := g.items, w.items
				if tc.o.updates {
					gi, wi = withoutPriority(gi), withoutPriority(wi)
				}
				if !reflect.DeepEqual(gi, wi) {
					t.Fatalf("sample %d: items %+v\nwant %+v", i, g.items, w.items)
				}
				if g.n != w.n || g.l != w.l || g.size != w.size || !reflect.DeepEqual(g.keys, w.keys) || !reflect.DeepEqual(g.probs, w.probs) || !wts {
					t.Fatalf("sample %d: n %d l %d size %d keys %v probs %v weights %v\nwant n %d l %d size %d keys %v probs %v weights %v",
						i, g.n, g.l, g.size, g.keys, g.probs, g.wts, w.n, w.l, w.size, w.keys, w.probs, w.wts)
				}
				for name, wb := range w.fields {
					if !bytes.Equal(g.fields[name], wb) {
						t.Fatalf("sample %d: field %s differs", i, name)
					}
				}
			}
		})
	}
}

// withoutPriority returns a copy of items with Priority 0.
func withoutPriority(items []tensorbuf.Item) []tensorbuf.Item {
	out := append([]tensorbuf.Item(nil), items...)
	for i := range out {
		out[i].Priority = 0
	}
	return out
}

// TestDeviceSelectionConfig: DeviceSelection is refused with ErrConfig
// where the host must see each draw (FIFO, LIFO, MaxTimesSampled) and on
// a backend without ItemSelector, and a refused table is not added.
func TestDeviceSelectionConfig(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  tensorbuf.TableConfig
		be   tensorbuf.Backend
	}{
		{"fifo", tensorbuf.TableConfig{Selector: tensorbuf.FIFO}, nil},
		{"prioritized max times sampled", tensorbuf.TableConfig{Selector: tensorbuf.Prioritized, MaxTimesSampled: 1}, nil},
		{"lifo", tensorbuf.TableConfig{Selector: tensorbuf.LIFO}, nil},
		{"max times sampled", tensorbuf.TableConfig{MaxTimesSampled: 2}, nil},
		{"backend without ItemSelector", tensorbuf.TableConfig{}, plainBackend{cpu.New()}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := tensorbuf.New(tensorbuf.Config{NumEnvs: 1, Capacity: 8, Fields: testFields, Backend: tc.be})
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close()
			tc.cfg.Name, tc.cfg.DeviceSelection = "t", true
			if _, err := b.NewTable(tc.cfg); !errors.Is(err, tensorbuf.ErrConfig) {
				t.Fatalf("NewTable: %v, want ErrConfig", err)
			}
			if _, err := b.Table("t"); !errors.Is(err, tensorbuf.ErrUnknownTable) {
				t.Fatalf("refused table was added: %v", err)
			}
		})
	}
}

// TestDeviceSelectionBatchReuse: a batch used by a device-selecting table
// and then by a host-selecting one drops its metadata tensors, HostMeta
// is then a no-op, and Release empties them.
func TestDeviceSelectionBatchReuse(t *testing.T) {
	b := newBuffer(t, 1, 8)
	m := newModel(1, 8)
	fill(t, b, m, [][]rawStep{mids(1, 0), mids(1, 1), mids(1, 2)})
	dev, err := b.NewTable(tensorbuf.TableConfig{Name: "d", DeviceSelection: true, Seed: 4})
	if err != nil {
		t.Fatal(err)
	}
	host, err := b.NewTable(tensorbuf.TableConfig{Name: "h", Seed: 4})
	if err != nil {
		t.Fatal(err)
	}
	var dk, hk uint64
	if dk, err = dev.Insert(tensorbuf.Item{Row: 0, Start: 1, Len: 2}); err != nil {
		t.Fatal(err)
	}
	if hk, err = host.Insert(tensorbuf.Item{Row: 0, Start: 1, Len: 2}); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	bt := new(tensorbuf.Batch)
	if err := dev.SampleInto(ctx, bt, 3); err != nil {
		t.Fatal(err)
	}
	if bt.KeyTensor == nil || len(bt.Keys) != 0 || len(bt.Items) != 0 {
		t.Fatalf("device sample: key tensor %v, keys %v, items %v", bt.KeyTensor, bt.Keys, bt.Items)
	}
	if err := bt.HostMeta(); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(bt.Keys, []uint64{dk, dk, dk}) || !reflect.DeepEqual(bt.Probabilities, []float64{1, 1, 1}) ||
		!reflect.DeepEqual(bt.Weights, []float64{1, 1, 1}) {
		t.Fatalf("HostMeta: keys %v probs %v weights %v", bt.Keys, bt.Probabilities, bt.Weights)
	}
	if err := host.SampleInto(ctx, bt, 2); err != nil {
		t.Fatal(err)
	}
	if bt.KeyTensor != nil || bt.ProbabilityTensor != nil || bt.WeightTensor != nil {
		t.Fatal("host sample kept the metadata tensors")
	}
	if err := bt.HostMeta(); err != nil || !reflect.DeepEqual(bt.Keys, []uint64{hk, hk}) {
		t.Fatalf("HostMeta after a host sample: %v, keys %v", err, bt.Keys)
	}
	if err := dev.SampleInto(ctx, bt, 2); err != nil {
		t.Fatal(err)
	}
	kt := bt.KeyTensor
	if err := bt.Release(); err != nil {
		t.Fatal(err)
	}
	if bt.KeyTensor != nil || kt.Shape().TotalSize() != 0 && kt.DataSize() != 0 {
		t.Fatalf("Release left the key tensor %v (size %d)", bt.KeyTensor, kt.DataSize())
	}
}

// TestDeviceSelectionAllocatesNothing: once warmed up, device-selected
// samples (uniform and prioritized), ones after items changed (the mirror
// patch and tree repair), HostMeta and UpdatePrioritiesDevice allocate
// nothing.
func TestDeviceSelectionAllocatesNothing(t *testing.T) {
	if testing.Short() {
		t.Skip("allocation counts are measured in the full run")
	}
	b := newBuffer(t, 4, 64)
	m := newModel(4, 64)
	var metas [][]rawStep
	for i := range 100 {
		metas = append(metas, mids(4, float32(i)))
	}
	fill(t, b, m, metas)
	tbl, err := b.NewTable(tensorbuf.TableConfig{Name: "t", DeviceSelection: true, Seed: 9})
	if err != nil {
		t.Fatal(err)
	}
	for r := range 4 {
		for s := range int64(60) {
			if _, err := tbl.Insert(tensorbuf.Item{Row: r, Start: 40 + s%20, Len: 4}); err != nil {
				t.Fatal(err)
			}
		}
	}
	ptbl, err := b.NewTable(tensorbuf.TableConfig{Name: "p", Selector: tensorbuf.Prioritized, Beta: 0.5, DeviceSelection: true, Seed: 9})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 200 {
		if _, err := ptbl.Insert(tensorbuf.Item{Row: i % 4, Start: 40 + int64(i%20), Len: 4, Priority: float64(i%7) + 0.5}); err != nil {
			t.Fatal(err)
		}
	}
	ctx := context.Background()
	bt, pbt := new(tensorbuf.Batch), new(tensorbuf.Batch)
	defer bt.Release()
	defer pbt.Release()
	if err := ptbl.SampleInto(ctx, pbt, 32); err != nil {
		t.Fatal(err)
	}
	ps := make([]float32, 32)
	for i := range ps {
		ps[i] = float32(i%5) + 1
	}
	prios := backendTensor(t, b.Backend(), tensor.Float32, ps)
	calls := []struct {
		name string
		f    func() error
	}{
		{"SampleInto", func() error { return tbl.SampleInto(ctx, bt, 32) }},
		{"SampleInto after an insert and a delete", func() error {
			k, err := tbl.Insert(tensorbuf.Item{Row: 1, Start: 50, Len: 3, Pad: 1})
			if err != nil {
				return err
			}
			tbl.Delete(k)
			return tbl.SampleInto(ctx, bt, 32)
		}},
		{"HostMeta", bt.HostMeta},
		{"prioritized SampleInto", func() error { return ptbl.SampleInto(ctx, pbt, 32) }},
		{"UpdatePrioritiesDevice", func() error { return ptbl.UpdatePrioritiesDevice(pbt.KeyTensor, prios) }},
		{"prioritized SampleInto after an insert", func() error {
			k, err := ptbl.Insert(tensorbuf.Item{Row: 2, Start: 50, Len: 4, Priority: 3})
			if err != nil {
				return err
			}
			ptbl.Delete(k)
			return ptbl.SampleInto(ctx, pbt, 32)
		}},
	}
	for _, c := range calls {
		if err := c.f(); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if n := testing.AllocsPerRun(50, func() {
			if err := c.f(); err != nil {
				t.Fatalf("%s: %v", c.name, err)
			}
		}); n != 0 {
			t.Errorf("%s: %v allocations per call", c.name, n)
		}
	}
}
