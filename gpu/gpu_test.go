//go:build trajring_cuda

package gpu

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/trajring/trajring/cpu"
	"github.com/trajring/trajring/kernels"
	"gorgonia.org/cu"
	"gorgonia.org/tensor"
)

// These tests run wherever a CUDA driver is found: on a GPU, or in CI on
// the stand-in driver (make test-cuda). Every result is compared byte for
// byte with the cpu backend, whole output arenas included, so bytes
// written outside an output (the guard bytes around it) are caught too.

func newBackend(t testing.TB) *Backend {
	t.Helper()
	b, err := New()
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() {
		if err := b.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return b
}

// pair holds the same arenas in the gpu backend and the cpu reference.
type pair struct {
	t   *testing.T
	rng *rand.Rand
	g   *Backend
	c   *cpu.Backend
}

type twin struct {
	g, c kernels.Arena
	n    int64
}

func newPair(t *testing.T, b *Backend, seed uint64) *pair {
	return &pair{t: t, rng: rand.New(rand.NewPCG(seed, 5)), g: b, c: cpu.New()}
}

func (p *pair) random(n int64) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(p.rng.Uint32())
	}
	return b
}

// arena allocates n bytes in both backends filled with the same random
// bytes (the guard pattern of outputs).
func (p *pair) arena(n int64) twin {
	p.t.Helper()
	g, err := p.g.Alloc(n)
	if err != nil {
		p.t.Fatal(err)
	}
	c, err := p.c.Alloc(n)
	if err != nil {
		p.t.Fatal(err)
	}
	data := p.random(n)
	if err := p.g.Upload(g, 0, data); err != nil {
		p.t.Fatal(err)
	}
	if err := p.c.Upload(c, 0, data); err != nil {
		p.t.Fatal(err)
	}
	p.t.Cleanup(func() { _ = p.g.Free(g) })
	return twin{g: g, c: c, n: n}
}

// same fails unless the two copies of a twin hold the same bytes.
func (p *pair) same(what string, a twin) {
	p.t.Helper()
	got, want := make([]byte, a.n), make([]byte, a.n)
	if err := p.g.Download(got, a.g, 0); err != nil {
		p.t.Fatal(err)
	}
	if err := p.c.Download(want, a.c, 0); err != nil {
		p.t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		i := 0
		for got[i] == want[i] {
			i++
		}
		p.t.Fatalf("%s: byte %d of %d: gpu %d, cpu %d", what, i, a.n, got[i], want[i])
	}
}

// forGrids runs a comparison test with the launch grid sized as usual,
// and again capped at one and at three blocks so that every thread loops
// over many steps (the grid-stride path a large batch takes on any
// device), which also makes threads race on repeated scatter indices.
func forGrids(t *testing.T, test func(t *testing.T, b *Backend)) {
	for _, blocks := range []int{0, 1, 3} {
		t.Run(fmt.Sprintf("blocks=%d", blocks), func(t *testing.T) {
			b := newBackend(t)
			if blocks > 0 {
				b.blocks = blocks // before the first call, on this goroutine
			}
			test(t, b)
		})
	}
}

var stepSizes = []int64{1, 2, 3, 4, 5, 8, 12, 16, 24, 28, 32, 64, 100, 256, 3072}

func (p *pair) step() int64 { return stepSizes[p.rng.IntN(len(stepSizes))] }

// out returns an output twin for n steps of s bytes, at a random offset
// with random guard bytes on both sides.
func (p *pair) out(n, s int64) (twin, int64) {
	off := p.rng.Int64N(40)
	return p.arena(off + n*s + 1 + p.rng.Int64N(40)), off
}

func TestAllocIsZeroed(t *testing.T) {
	b := newBackend(t)
	for _, n := range []int64{1, 17, 4096, 1 << 20} {
		a, err := b.Alloc(n)
		if err != nil {
			t.Fatal(err)
		}
		got := make([]byte, n)
		if err := b.Download(got, a, 0); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, make([]byte, n)) {
			t.Fatalf("Alloc(%d) is not zeroed", n)
		}
		if a.Size() != n {
			t.Fatalf("Size = %d, want %d", a.Size(), n)
		}
		if err := b.Free(a); err != nil {
			t.Fatal(err)
		}
	}
	a, err := b.Alloc(0)
	if err != nil || a.Size() != 0 {
		t.Fatalf("Alloc(0) = %v, %v", a, err)
	}
}

func TestUploadDownload(t *testing.T) {
	b := newBackend(t)
	p := newPair(t, b, 1)
	for _, n := range []int64{1, 100, 1 << 16, maxStagedUpload + 5} {
		a, err := b.Alloc(n + 10)
		if err != nil {
			t.Fatal(err)
		}
		data := p.random(n)
		if err := b.Upload(a, 7, data); err != nil {
			t.Fatal(err)
		}
		got := make([]byte, n+10)
		if err := b.Download(got, a, 0); err != nil {
			t.Fatal(err)
		}
		want := append(append(make([]byte, 7), data...), 0, 0, 0)
		if !bytes.Equal(got, want) {
			t.Fatalf("%d bytes: round trip differs", n)
		}
		if err := b.Free(a); err != nil {
			t.Fatal(err)
		}
	}
}

func TestCopy(t *testing.T) {
	b := newBackend(t)
	p := newPair(t, b, 2)
	src, dst := p.arena(1000), p.arena(1000)
	if err := b.Copy(dst.g, 10, src.g, 100, 500); err != nil {
		t.Fatal(err)
	}
	want := make([]byte, 1000)
	_ = p.c.Download(want, dst.c, 0)
	s := make([]byte, 1000)
	_ = p.c.Download(s, src.c, 0)
	copy(want[10:510], s[100:600])
	got := make([]byte, 1000)
	if err := b.Download(got, dst.g, 0); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("Copy moved the wrong bytes")
	}
	if err := b.Copy(src.g, 0, src.g, 10, 20); !errors.Is(err, ErrBounds) {
		t.Fatalf("overlapping copy: %v, want ErrBounds", err)
	}
}

func TestGatherRowsMatchesCPU(t *testing.T) { forGrids(t, testGatherRowsMatchesCPU) }

func testGatherRowsMatchesCPU(t *testing.T, b *Backend) {
	for trial := range 40 {
		p := newPair(t, b, 100+uint64(trial))
		steps := 1 + p.rng.Int64N(300)
		n := p.rng.Int64N(200)
		idx := make([]int64, n)
		for i := range idx {
			idx[i] = p.rng.Int64N(steps)
		}
		var gc, cc []kernels.Column
		var outs []twin
		for range 1 + p.rng.IntN(5) {
			s := p.step()
			ring := p.arena(steps * s)
			out, off := p.out(n, s)
			outs = append(outs, out)
			gc = append(gc, kernels.Column{Ring: ring.g, StepBytes: s, Out: out.g, OutOff: off})
			cc = append(cc, kernels.Column{Ring: ring.c, StepBytes: s, Out: out.c, OutOff: off})
		}
		if err := b.GatherRows(gc, idx); err != nil {
			t.Fatal(err)
		}
		if err := p.c.GatherRows(cc, idx); err != nil {
			t.Fatal(err)
		}
		for c, o := range outs {
			p.same(fmt.Sprintf("trial %d column %d", trial, c), o)
		}
	}
}

func TestConcatMatchesCPU(t *testing.T) { forGrids(t, testConcatMatchesCPU) }

func testConcatMatchesCPU(t *testing.T, b *Backend) {
	for trial := range 40 {
		p := newPair(t, b, 200+uint64(trial))
		steps := 2 + p.rng.Int64N(300)
		n := p.rng.Int64N(200)
		idx, next := make([]int64, n), make([]int64, n)
		for i := range idx {
			idx[i] = p.rng.Int64N(steps - 1)
			next[i] = idx[i] + 1
		}
		var gc, cc []kernels.Column
		var outs []twin
		for c := range 1 + p.rng.IntN(5) {
			s := p.step()
			ring := p.arena(steps * s)
			out, off := p.out(n, s)
			outs = append(outs, out)
			g := kernels.Column{Ring: ring.g, StepBytes: s, Out: out.g, OutOff: off}
			h := kernels.Column{Ring: ring.c, StepBytes: s, Out: out.c, OutOff: off}
			if c%2 == 0 {
				nx, noff := p.out(n, s)
				outs = append(outs, nx)
				g.NextOut, g.NextOff = nx.g, noff
				h.NextOut, h.NextOff = nx.c, noff
			}
			gc, cc = append(gc, g), append(cc, h)
		}
		if err := b.Concat(gc, idx, next); err != nil {
			t.Fatal(err)
		}
		if err := p.c.Concat(cc, idx, next); err != nil {
			t.Fatal(err)
		}
		for i, o := range outs {
			p.same(fmt.Sprintf("trial %d output %d", trial, i), o)
		}
	}
}

func TestScatterMatchesCPU(t *testing.T) { forGrids(t, testScatterMatchesCPU) }

func testScatterMatchesCPU(t *testing.T, b *Backend) {
	for trial := range 40 {
		p := newPair(t, b, 300+uint64(trial))
		steps := 1 + p.rng.Int64N(300)
		n := p.rng.Int64N(100)
		idx := make([]int64, n)
		for i := range idx {
			idx[i] = p.rng.Int64N(steps) // repeats: the last write must win
		}
		if trial%4 == 0 { // and the common case: one step per row, growing
			for i := range idx {
				idx[i] = int64(i) * steps / max(n, 1)
			}
		}
		var gc, cc []kernels.Column
		var srcs [][]byte
		var rings []twin
		for range 1 + p.rng.IntN(5) {
			s := p.step()
			ring := p.arena(steps * s)
			rings = append(rings, ring)
			srcs = append(srcs, p.random(n*s))
			gc = append(gc, kernels.Column{Ring: ring.g, StepBytes: s})
			cc = append(cc, kernels.Column{Ring: ring.c, StepBytes: s})
		}
		keep := make([][]byte, len(srcs))
		for c := range srcs {
			keep[c] = bytes.Clone(srcs[c])
		}
		if err := b.Scatter(gc, srcs, idx); err != nil {
			t.Fatal(err)
		}
		for _, s := range srcs { // the sources are staged: reusing them is safe
			clear(s)
		}
		if err := p.c.Scatter(cc, keep, idx); err != nil {
			t.Fatal(err)
		}
		for c, r := range rings {
			p.same(fmt.Sprintf("trial %d ring %d", trial, c), r)
		}
	}
}

func TestGatherWindowsMatchesCPU(t *testing.T) { forGrids(t, testGatherWindowsMatchesCPU) }

func testGatherWindowsMatchesCPU(t *testing.T, b *Backend) {
	for trial := range 60 {
		p := newPair(t, b, 400+uint64(trial))
		capacity := 1 + p.rng.Int64N(20)
		rows := 1 + p.rng.Int64N(5)
		seqLen := 1 + p.rng.Int64N(10)
		wins := make([]kernels.Window, p.rng.IntN(30))
		for i := range wins {
			wins[i] = kernels.Window{
				Row:   p.rng.Int64N(rows),
				Start: p.rng.Int64N(1000 * capacity), // absolute: wraps around
				Len:   p.rng.Int64N(min(seqLen, capacity) + 1),
			}
		}
		n := int64(len(wins)) * seqLen
		var gc, cc []kernels.Column
		var outs []twin
		for range p.rng.IntN(5) {
			s := p.step()
			ring := p.arena(rows * capacity * s)
			out, off := p.out(n, s)
			outs = append(outs, out)
			g := kernels.Column{Ring: ring.g, StepBytes: s, Out: out.g, OutOff: off}
			h := kernels.Column{Ring: ring.c, StepBytes: s, Out: out.c, OutOff: off}
			if p.rng.IntN(2) == 0 {
				g.Pad = p.random(s)
				h.Pad = g.Pad
			}
			gc, cc = append(gc, g), append(cc, h)
		}
		var gm, cm kernels.Arena
		var moff int64
		if trial%3 != 0 {
			m, off := p.out(n, 1)
			outs = append(outs, m)
			gm, cm, moff = m.g, m.c, off
		}
		if err := b.GatherWindows(gc, wins, seqLen, capacity, gm, moff); err != nil {
			t.Fatal(err)
		}
		if err := p.c.GatherWindows(cc, wins, seqLen, capacity, cm, moff); err != nil {
			t.Fatal(err)
		}
		for i, o := range outs {
			p.same(fmt.Sprintf("trial %d output %d", trial, i), o)
		}
	}
}

func TestTensorViewsDeviceMemory(t *testing.T) {
	b := newBackend(t)
	a, err := b.Alloc(4096)
	if err != nil {
		t.Fatal(err)
	}
	d, err := b.Tensor(a, 64, tensor.Float32, 8, 4)
	if err != nil {
		t.Fatal(err)
	}
	if got := d.Shape(); !got.Eq(tensor.Shape{8, 4}) {
		t.Errorf("shape %v, want (8, 4)", got)
	}
	if d.Dtype() != tensor.Float32 {
		t.Errorf("dtype %v, want float32", d.Dtype())
	}
	if got, want := d.Uintptr(), uintptr(a.(*Arena).Ptr())+64; got != want {
		t.Errorf("tensor at %#x, want device address %#x", got, want)
	}
	if got := d.MemSize(); got != 8*4*4 {
		t.Errorf("tensor spans %d bytes, want 128", got)
	}
	tests := []struct {
		name  string
		off   int64
		dt    tensor.Dtype
		shape []int
	}{
		{"past the end", 4000, tensor.Float64, []int{13}},
		{"misaligned", 2, tensor.Int32, []int{4}},
		{"negative offset", -8, tensor.Uint8, []int{4}},
		{"zero dimension", 0, tensor.Uint8, []int{4, 0}},
		{"unsupported dtype", 0, tensor.Complex128, []int{4}},
	}
	for _, tc := range tests {
		if _, err := b.Tensor(a, tc.off, tc.dt, tc.shape...); !errors.Is(err, ErrBounds) {
			t.Errorf("%s: %v, want ErrBounds", tc.name, err)
		}
	}
}

func TestGatherWindowsExact(t *testing.T) {
	b := newBackend(t)
	ring, err := b.Alloc(8)
	if err != nil {
		t.Fatal(err)
	}
	out, _ := b.Alloc(12)
	mask, _ := b.Alloc(12)
	if err := b.Upload(ring, 0, []byte{10, 11, 12, 13, 20, 21, 22, 23}); err != nil {
		t.Fatal(err)
	}
	wins := []kernels.Window{{Row: 1, Start: 6, Len: 4}, {Row: 0, Start: 3, Len: 1}, {Row: 0, Start: 0, Len: 0}}
	cols := []kernels.Column{{Ring: ring, StepBytes: 1, Out: out, Pad: []byte{99}}}
	if err := b.GatherWindows(cols, wins, 4, 4, mask, 0); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, 12)
	if err := b.Download(got, out, 0); err != nil {
		t.Fatal(err)
	}
	if want := []byte{22, 23, 20, 21, 13, 99, 99, 99, 99, 99, 99, 99}; !bytes.Equal(got, want) {
		t.Errorf("out = %v, want %v", got, want)
	}
	if err := b.Download(got, mask, 0); err != nil {
		t.Fatal(err)
	}
	if want := []byte{1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0}; !bytes.Equal(got, want) {
		t.Errorf("mask = %v, want %v", got, want)
	}
}

// TestDevice reports which device and driver the tests ran on (the
// stand-in driver names itself), so that logs show what was exercised.
func TestDevice(t *testing.T) {
	b := newBackend(t)
	if b.Device() == "" {
		t.Fatal("empty device name")
	}
	t.Logf("device: %s, driver API version %d", b.Device(), cu.Version())
}
