//go:build trajring_cuda

package gpu

// Errors, misuse, a closed backend and concurrent use of one backend.

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/trajring/trajring/kernels"
)

func TestErrors(t *testing.T) {
	b := newBackend(t)
	p := newPair(t, b, 7)
	ring := p.arena(64) // 16 steps of 4 bytes, or 4 rows of capacity 4
	out := p.arena(64)
	freed, err := b.Alloc(16)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Free(freed); err != nil {
		t.Fatal(err)
	}
	other := newBackend(t)
	foreign, err := other.Alloc(64)
	if err != nil {
		t.Fatal(err)
	}
	col := kernels.Column{Ring: ring.g, StepBytes: 4, Out: out.g}
	with := func(f func(c *kernels.Column)) []kernels.Column {
		c := col
		f(&c)
		return []kernels.Column{c}
	}
	win := []kernels.Window{{Row: 0, Start: 0, Len: 2}}
	tests := []struct {
		name string
		err  error
		call func() error
	}{
		{"alloc negative", ErrBounds, func() error { _, err := b.Alloc(-1); return err }},
		{"alloc beyond device memory", ErrOutOfMemory, func() error { _, err := b.Alloc(1 << 50); return err }},
		{"free twice", ErrArena, func() error { return b.Free(freed) }},
		{"free cpu arena", ErrArena, func() error { return b.Free(ring.c) }},
		{"upload past end", ErrBounds, func() error { return b.Upload(out.g, 60, make([]byte, 5)) }},
		{"upload negative offset", ErrBounds, func() error { return b.Upload(out.g, -1, make([]byte, 1)) }},
		{"upload freed", ErrArena, func() error { return b.Upload(freed, 0, make([]byte, 1)) }},
		{"download past end", ErrBounds, func() error { return b.Download(make([]byte, 65), out.g, 0) }},
		{"download foreign", ErrArena, func() error { return b.Download(make([]byte, 1), foreign, 0) }},
		{"scatter source count", ErrBounds, func() error { return b.Scatter([]kernels.Column{col}, nil, []int64{0}) }},
		{"scatter source size", ErrBounds, func() error { return b.Scatter([]kernels.Column{col}, [][]byte{make([]byte, 3)}, []int64{0}) }},
		{"scatter index past ring", ErrBounds, func() error { return b.Scatter([]kernels.Column{col}, [][]byte{make([]byte, 4)}, []int64{16}) }},
		{"scatter negative index", ErrBounds, func() error { return b.Scatter([]kernels.Column{col}, [][]byte{make([]byte, 4)}, []int64{-1}) }},
		{"scatter zero step", ErrBounds, func() error {
			return b.Scatter(with(func(c *kernels.Column) { c.StepBytes = 0 }), [][]byte{{}}, []int64{0})
		}},
		{"scatter cpu ring", ErrArena, func() error {
			return b.Scatter(with(func(c *kernels.Column) { c.Ring = ring.c }), [][]byte{make([]byte, 4)}, []int64{0})
		}},
		{"gather index past ring", ErrBounds, func() error { return b.GatherRows([]kernels.Column{col}, []int64{16}) }},
		{"gather output too small", ErrBounds, func() error { return b.GatherRows([]kernels.Column{col}, make([]int64, 17)) }},
		{"gather output offset", ErrBounds, func() error {
			return b.GatherRows(with(func(c *kernels.Column) { c.OutOff = 61 }), []int64{0})
		}},
		{"gather freed output", ErrArena, func() error {
			return b.GatherRows(with(func(c *kernels.Column) { c.Out = freed }), []int64{0})
		}},
		{"concat successor count", ErrBounds, func() error { return b.Concat([]kernels.Column{col}, []int64{0}, nil) }},
		{"concat successor past ring", ErrBounds, func() error {
			return b.Concat(with(func(c *kernels.Column) { c.NextOut = out.g; c.NextOff = 32 }), []int64{0}, []int64{16})
		}},
		{"concat successor output", ErrBounds, func() error {
			return b.Concat(with(func(c *kernels.Column) { c.NextOut = out.g; c.NextOff = 61 }), []int64{0}, []int64{1})
		}},
		{"windows zero length", ErrBounds, func() error { return b.GatherWindows([]kernels.Column{col}, win, 0, 4, nil, 0) }},
		{"windows zero capacity", ErrBounds, func() error { return b.GatherWindows([]kernels.Column{col}, win, 2, 0, nil, 0) }},
		{"windows row past ring", ErrBounds, func() error {
			return b.GatherWindows([]kernels.Column{col}, []kernels.Window{{Row: 4, Len: 1}}, 2, 4, nil, 0)
		}},
		{"windows len past sequence", ErrBounds, func() error {
			return b.GatherWindows([]kernels.Column{col}, []kernels.Window{{Len: 3}}, 2, 4, nil, 0)
		}},
		{"windows len past capacity", ErrBounds, func() error {
			return b.GatherWindows([]kernels.Column{col}, []kernels.Window{{Len: 5}}, 8, 4, nil, 0)
		}},
		{"windows negative start", ErrBounds, func() error {
			return b.GatherWindows([]kernels.Column{col}, []kernels.Window{{Start: -1, Len: 1}}, 2, 4, nil, 0)
		}},
		{"windows pad size", ErrBounds, func() error {
			return b.GatherWindows(with(func(c *kernels.Column) { c.Pad = []byte{1} }), win, 2, 4, nil, 0)
		}},
		{"windows mask too small", ErrBounds, func() error { return b.GatherWindows([]kernels.Column{col}, win, 2, 4, out.g, 63) }},
		{"windows cpu mask", ErrArena, func() error { return b.GatherWindows([]kernels.Column{col}, win, 2, 4, out.c, 0) }},
		{"copy past end", ErrBounds, func() error { return b.Copy(out.g, 0, ring.g, 10, 60) }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.call(); !errors.Is(err, tc.err) {
				t.Fatalf("error %v, want %v", err, tc.err)
			}
		})
	}
	// A failed call changes nothing.
	p.same("ring after failed calls", ring)
	p.same("output after failed calls", out)
}

func TestOutOfMemoryIsAnError(t *testing.T) {
	b := newBackend(t)
	_, err := b.Alloc(1 << 50)
	if !errors.Is(err, ErrOutOfMemory) {
		t.Fatalf("Alloc(1 PiB): %v, want ErrOutOfMemory", err)
	}
	// The backend still works afterwards.
	a, err := b.Alloc(8)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Upload(a, 0, []byte{1, 2, 3, 4, 5, 6, 7, 8}); err != nil {
		t.Fatal(err)
	}
}

func TestClosed(t *testing.T) {
	b, err := New()
	if err != nil {
		t.Fatal(err)
	}
	a, err := b.Alloc(8)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); !errors.Is(err, ErrClosed) {
		t.Errorf("second Close: %v, want ErrClosed", err)
	}
	if _, err := b.Alloc(8); !errors.Is(err, ErrClosed) {
		t.Errorf("Alloc after Close: %v, want ErrClosed", err)
	}
	if err := b.Download(make([]byte, 8), a, 0); !errors.Is(err, ErrClosed) {
		t.Errorf("Download after Close: %v, want ErrClosed", err)
	}
	if err := b.Sync(); !errors.Is(err, ErrClosed) {
		t.Errorf("Sync after Close: %v, want ErrClosed", err)
	}
}

// TestConcurrentUse issues gathers and scatters from several goroutines
// into disjoint memory, many more than there are staging slots, without
// waiting between them, and checks every result.
func TestConcurrentUse(t *testing.T) {
	b := newBackend(t)
	p := newPair(t, b, 11)
	const workers, rounds, s = 4, 25, 24
	ring := p.arena(1000 * s)
	ringData := make([]byte, ring.n)
	if err := p.c.Download(ringData, ring.c, 0); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		out, err := b.Alloc(rounds * 10 * s)
		if err != nil {
			t.Fatal(err)
		}
		scat, err := b.Alloc(rounds * 10 * s)
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 3))
			var want, wantScat []byte
			for r := range rounds {
				idx := make([]int64, 10)
				for i := range idx {
					idx[i] = rng.Int64N(1000)
					want = append(want, ringData[idx[i]*s:(idx[i]+1)*s]...)
				}
				col := []kernels.Column{{Ring: ring.g, StepBytes: s, Out: out, OutOff: int64(r) * 10 * s}}
				if err := b.GatherRows(col, idx); err != nil {
					errs <- err
					return
				}
				src := make([]byte, 10*s)
				for i := range src {
					src[i] = byte(rng.Uint32())
				}
				wantScat = append(wantScat, src...)
				sidx := make([]int64, 10)
				for i := range sidx {
					sidx[i] = int64(r*10 + i)
				}
				if err := b.Scatter([]kernels.Column{{Ring: scat, StepBytes: s}}, [][]byte{src}, sidx); err != nil {
					errs <- err
					return
				}
			}
			got := make([]byte, len(want))
			if err := b.Download(got, out, 0); err != nil {
				errs <- err
				return
			}
			if !bytes.Equal(got, want) {
				errs <- fmt.Errorf("worker %d: gathered rows differ", w)
				return
			}
			if err := b.Download(got, scat, 0); err != nil {
				errs <- err
				return
			}
			if !bytes.Equal(got, wantScat) {
				errs <- fmt.Errorf("worker %d: scattered steps differ", w)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// TestGatherWindowsExact pins pad pattern, mask bytes and wrap-around.
