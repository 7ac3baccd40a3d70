//go:build trajring_cuda

package gpu

import (
	"bytes"
	"errors"
	"fmt"
	"testing"

	"github.com/trajring/trajring/kernels"
	"gorgonia.org/tensor"
)

// devSource returns a device tensor over n bytes at a random offset of a
// twin arena with random guard bytes on both sides (the same bytes in the
// cpu twin), holding data.
func (p *pair) devSource(data []byte) (twin, *tensor.Dense) {
	p.t.Helper()
	off := p.rng.Int64N(40)
	a := p.arena(off + int64(len(data)) + 1 + p.rng.Int64N(40))
	if err := p.g.Upload(a.g, off, data); err != nil {
		p.t.Fatal(err)
	}
	if err := p.c.Upload(a.c, off, data); err != nil {
		p.t.Fatal(err)
	}
	d, err := p.g.Tensor(a.g, off, tensor.Uint8, len(data))
	if err != nil {
		p.t.Fatal(err)
	}
	return a, d
}

func TestScatterFromMatchesCPU(t *testing.T) { forGrids(t, testScatterFromMatchesCPU) }

// testScatterFromMatchesCPU: a scatter whose columns read device tensors
// (at unaligned offsets, guard bytes around them), host bytes, or a mix,
// into rings of their own or one packed record, writes the rings the cpu
// reference writes from the same bytes, and leaves the sources as they
// were. The stand-in kills the process on any host read of device memory.
func testScatterFromMatchesCPU(t *testing.T, b *Backend) {
	for trial := range 40 {
		p := newPair(t, b, 900+uint64(trial))
		steps := 1 + p.rng.Int64N(300)
		n := 1 + p.rng.Int64N(100)
		idx := make([]int64, n)
		for i := range idx {
			idx[i] = p.rng.Int64N(steps) // repeats: the last write must win
		}
		if trial%4 == 0 {
			for i := range idx {
				idx[i] = int64(i) * steps / n
			}
		}
		ncols := 1 + p.rng.IntN(5)
		sizes := make([]int64, ncols)
		stride := int64(0)
		for c := range sizes {
			sizes[c] = p.step()
			stride += sizes[c]
		}
		packed := trial%3 == 1 // every column in one record of stride bytes
		var shared twin
		if packed {
			shared = p.arena(steps * stride)
		}
		gc := make([]kernels.Column, ncols)
		cc := make([]kernels.Column, ncols)
		srcs, keep := make([][]byte, ncols), make([][]byte, ncols)
		dev := make([]*tensor.Dense, ncols)
		var rings, devArenas []twin
		off := int64(0)
		for c, s := range sizes {
			data := p.random(n * s)
			keep[c] = data
			switch {
			case trial%5 == 2 || p.rng.IntN(3) > 0: // device source
				a, d := p.devSource(data)
				devArenas, dev[c] = append(devArenas, a), d
			default:
				srcs[c] = bytes.Clone(data)
			}
			if packed {
				gc[c] = kernels.Column{Ring: shared.g, StepBytes: s, Stride: stride, Offset: off}
				cc[c] = kernels.Column{Ring: shared.c, StepBytes: s, Stride: stride, Offset: off}
				off += s
				continue
			}
			ring := p.arena(steps * s)
			rings = append(rings, ring)
			gc[c] = kernels.Column{Ring: ring.g, StepBytes: s}
			cc[c] = kernels.Column{Ring: ring.c, StepBytes: s}
		}
		if packed {
			rings = append(rings, shared)
		}
		if err := b.ScatterFrom(gc, srcs, dev, idx); err != nil {
			t.Fatal(err)
		}
		for _, s := range srcs { // host sources are staged: reusing them is safe
			clear(s)
		}
		if err := p.c.Scatter(cc, keep, idx); err != nil {
			t.Fatal(err)
		}
		for c, r := range rings {
			p.same(fmt.Sprintf("trial %d ring %d", trial, c), r)
		}
		for c, a := range devArenas {
			p.same(fmt.Sprintf("trial %d source %d (with its guard bytes)", trial, c), a)
		}
	}
}

// TestScatterFromRefuses: device sources this backend cannot read in
// place, and malformed calls, are refused with a sentinel before anything
// is queued: no launch, the ring unchanged.
func TestScatterFromRefuses(t *testing.T) {
	b := newBackend(t)
	other := newBackend(t)
	p := newPair(t, b, 7)
	const n, s = 4, 8
	ring := p.arena(16 * s)
	col := []kernels.Column{{Ring: ring.g, StepBytes: s}}
	idx := []int64{0, 3, 5, 9}
	_, good := p.devSource(p.random(n * s))
	otherArena, err := other.Alloc(n * s)
	if err != nil {
		t.Fatal(err)
	}
	foreign, err := other.Tensor(otherArena, 0, tensor.Uint8, n*s)
	if err != nil {
		t.Fatal(err)
	}
	_, short := p.devSource(p.random(n*s - 1))
	inRing, err := b.Tensor(ring.g, 8*s, tensor.Uint8, n*s)
	if err != nil {
		t.Fatal(err)
	}
	// Freed last: a later Alloc may reuse its addresses, and a tensor over
	// memory of a live arena is accepted (CheckSource checks addresses).
	freedArena, err := b.Alloc(n * s)
	if err != nil {
		t.Fatal(err)
	}
	freed, err := b.Tensor(freedArena, 0, tensor.Uint8, n*s)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Free(freedArena); err != nil {
		t.Fatal(err)
	}
	host := tensor.New(tensor.Of(tensor.Uint8), tensor.WithShape(n*s))
	for _, tc := range []struct {
		name string
		src  [][]byte
		dev  []*tensor.Dense
		want error
	}{
		{"another backend's memory", [][]byte{nil}, []*tensor.Dense{foreign}, ErrArena},
		{"a freed arena", [][]byte{nil}, []*tensor.Dense{freed}, ErrArena},
		{"a host tensor", [][]byte{nil}, []*tensor.Dense{host}, ErrArena},
		{"too few bytes", [][]byte{nil}, []*tensor.Dense{short}, ErrBounds},
		{"the ring it writes", [][]byte{nil}, []*tensor.Dense{inRing}, ErrBounds},
		{"a host and a device source", [][]byte{make([]byte, n*s)}, []*tensor.Dense{good}, ErrBounds},
		{"no device source list", [][]byte{nil}, nil, ErrBounds},
	} {
		before := b.Launches()
		err := b.ScatterFrom(col, tc.src, tc.dev, idx)
		if !errors.Is(err, tc.want) {
			t.Fatalf("ScatterFrom from %s: %v, want %v", tc.name, err, tc.want)
		}
		if got := b.Launches(); got != before {
			t.Fatalf("ScatterFrom from %s launched %d kernels", tc.name, got-before)
		}
		p.same("ring after ScatterFrom from "+tc.name, ring)
	}
	for _, tc := range []struct {
		name string
		d    *tensor.Dense
		n    int64
		want error
	}{
		{"own arena", good, n * s, nil},
		{"own arena, fewer bytes", good, 1, nil},
		{"another backend's memory", foreign, n * s, ErrArena},
		{"a freed arena", freed, n * s, ErrArena},
		{"a host tensor", host, n * s, ErrArena},
		{"nil", nil, n * s, ErrArena},
		{"more bytes than the tensor", good, n*s + 1, ErrBounds},
	} {
		if err := b.CheckSource(tc.d, tc.n); !errors.Is(err, tc.want) || (tc.want == nil) != (err == nil) {
			t.Errorf("CheckSource(%s): %v, want %v", tc.name, err, tc.want)
		}
	}
}

// TestScatterFromAllocatesNothing: the steady state of a scatter from
// device sources (the arena found by the hint) allocates nothing.
func TestScatterFromAllocatesNothing(t *testing.T) {
	b := newBackend(t)
	p := newPair(t, b, 8)
	ring := p.arena(64 * 16)
	cols := []kernels.Column{{Ring: ring.g, StepBytes: 12, Stride: 16}, {Ring: ring.g, StepBytes: 4, Stride: 16, Offset: 12}}
	_, d := p.devSource(p.random(8 * 12))
	src := [][]byte{nil, p.random(8 * 4)}
	dev := []*tensor.Dense{d, nil}
	idx := []int64{0, 9, 18, 27, 36, 45, 54, 63}
	if err := b.ScatterFrom(cols, src, dev, idx); err != nil {
		t.Fatal(err)
	}
	if n := testing.AllocsPerRun(50, func() {
		if err := b.ScatterFrom(cols, src, dev, idx); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Fatalf("ScatterFrom: %v allocations per call", n)
	}
}
