//go:build trajring_cuda

package gpu

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"
	"unsafe"

	"github.com/trajring/trajring/kernels"
)

// f32Bytes returns the bytes of v.
func f32Bytes(v []float32) []byte {
	if len(v) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&v[0])), 4*len(v))
}

// rewards returns a twin reward ring of rows*capacity float32: random
// signs and magnitudes, or ±3^k (whose sums with gamma 1/3 cancel exactly,
// so a fused multiply-add would show) when cancel is set.
func (p *pair) rewards(rows, capacity int64, cancel bool) twin {
	p.t.Helper()
	v := make([]float32, rows*capacity)
	for i := range v {
		switch {
		case cancel:
			v[i] = float32([]int{1, 3, 9}[p.rng.IntN(3)] * (1 - 2*p.rng.IntN(2)))
		case p.rng.IntN(8) == 0:
			v[i] = math.Float32frombits(p.rng.Uint32() & 0x807fffff) // subnormal or ±0
		default:
			v[i] = float32(p.rng.NormFloat64() * math.Pow(10, float64(p.rng.IntN(13)-6)))
		}
	}
	r := p.arena(4 * rows * capacity)
	if err := p.g.Upload(r.g, 0, f32Bytes(v)); err != nil {
		p.t.Fatal(err)
	}
	if err := p.c.Upload(r.c, 0, f32Bytes(v)); err != nil {
		p.t.Fatal(err)
	}
	return r
}

func TestNStepRewardMatchesCPU(t *testing.T) { forGrids(t, testNStepRewardMatchesCPU) }

func testNStepRewardMatchesCPU(t *testing.T, b *Backend) {
	gammas := []float64{0, 1, 0.5, 0.99, 1.0 / 3}
	for trial := range 40 {
		p := newPair(t, b, 100+uint64(trial))
		rows := 1 + p.rng.Int64N(5)
		capacity := 1 + p.rng.Int64N(40)
		n := p.rng.Int64N(300) // zero windows too; more than one block
		gamma := p.rng.Float64()
		if trial%2 == 0 {
			gamma = gammas[trial/2%len(gammas)]
		}
		cancel := trial%5 == 4
		if cancel {
			gamma = 1.0 / 3
		}
		ring := p.rewards(rows, capacity, cancel)
		wins := make([]kernels.Window, n)
		for i := range wins {
			wins[i] = kernels.Window{
				Row:   p.rng.Int64N(rows),
				Start: p.rng.Int64N(10 * capacity), // absolute: wraps around the ring
				Len:   p.rng.Int64N(capacity + 1),
			}
			if p.rng.IntN(4) == 0 {
				wins[i].Len = capacity
			}
		}
		// Guard bytes on both sides of the sums: random, the same in both.
		off := 4 * p.rng.Int64N(10)
		out := p.arena(off + 4*n + 4 + 4*p.rng.Int64N(10))
		if err := b.NStepReward(ring.g, out.g, off, wins, capacity, gamma); err != nil {
			t.Fatal(err)
		}
		if err := p.c.NStepReward(ring.c, out.c, off, wins, capacity, gamma); err != nil {
			t.Fatal(err)
		}
		p.same(fmt.Sprintf("trial %d (rows %d, capacity %d, %d windows, gamma %v)", trial, rows, capacity, n, gamma), out)
		p.same("ring", ring)
	}
}

// TestNStepRewardExact pins sums worked out by hand: wrap-around, a
// window starting past the first lap, gamma 0, and a sum that a fused
// multiply-add would leave at -2^-55 instead of 0.
func TestNStepRewardExact(t *testing.T) {
	b := newBackend(t)
	ring, err := b.Alloc(4 * 8)
	if err != nil {
		t.Fatal(err)
	}
	// Row 0: 1 2 3 4; row 1: -1 3 10 20 (capacity 4).
	if err := b.Upload(ring, 0, f32Bytes([]float32{1, 2, 3, 4, -1, 3, 10, 20})); err != nil {
		t.Fatal(err)
	}
	out, err := b.Alloc(4 * 6)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name  string
		gamma float64
		wins  []kernels.Window
		want  []float32
	}{
		{"halving, wrapping", 0.5, []kernels.Window{{Row: 0, Start: 2, Len: 3}, {Row: 0, Start: 9, Len: 4}, {Row: 1, Start: 0, Len: 0}},
			[]float32{3 + 0.5*4 + 0.25*1, 2 + 0.5*3 + 0.25*4 + 0.125*1, 0}},
		{"gamma one", 1, []kernels.Window{{Row: 1, Start: 6, Len: 4}}, []float32{10 + 20 - 1 + 3}},
		{"gamma zero", 0, []kernels.Window{{Row: 1, Start: 3, Len: 4}, {Row: 0, Start: 0, Len: 1}}, []float32{20, 1}},
		{"no fused multiply-add", 1.0 / 3, []kernels.Window{{Row: 1, Start: 4, Len: 2}}, []float32{0}},
	}
	guard := []byte{0xAB, 0xAB, 0xAB, 0xAB}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			init := make([]byte, 24)
			for i := range init {
				init[i] = 0xAB
			}
			if err := b.Upload(out, 0, init); err != nil {
				t.Fatal(err)
			}
			if err := b.NStepReward(ring, out, 4, tc.wins, 4, tc.gamma); err != nil {
				t.Fatal(err)
			}
			got := make([]byte, 24)
			if err := b.Download(got, out, 0); err != nil {
				t.Fatal(err)
			}
			want := append(append(append([]byte(nil), guard...), f32Bytes(tc.want)...), init[4+4*len(tc.want):]...)
			for i := range got {
				if got[i] != want[i] {
					g := unsafe.Slice((*float32)(unsafe.Pointer(&got[0])), 6)
					w := unsafe.Slice((*float32)(unsafe.Pointer(&want[0])), 6)
					t.Fatalf("out = %v, want %v (0xABABABAB = %v is the guard)", g, w, math.Float32frombits(0xABABABAB))
				}
			}
		})
	}
}

func TestNStepRewardErrors(t *testing.T) {
	b := newBackend(t)
	p := newPair(t, b, 9)
	ring := p.arena(64) // 4 rows of capacity 4, or 2 of 8
	out := p.arena(32)
	freed, err := b.Alloc(16)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Free(freed); err != nil {
		t.Fatal(err)
	}
	odd := p.arena(62)
	win := []kernels.Window{{Row: 3, Start: 5, Len: 4}}
	tests := []struct {
		name     string
		err      error
		ring     kernels.Arena
		out      kernels.Arena
		off      int64
		wins     []kernels.Window
		capacity int64
		gamma    float64
	}{
		{"cpu ring", ErrArena, ring.c, out.g, 0, win, 4, 0.9},
		{"freed output", ErrArena, ring.g, freed, 0, win, 4, 0.9},
		{"nil output", ErrArena, ring.g, nil, 0, win, 4, 0.9},
		{"zero capacity", ErrBounds, ring.g, out.g, 0, win, 0, 0.9},
		{"negative capacity", ErrBounds, ring.g, out.g, 0, win, -4, 0.9},
		{"ring not whole rows", ErrBounds, ring.g, out.g, 0, win, 5, 0.9},
		{"ring not whole floats", ErrBounds, odd.g, out.g, 0, nil, 1, 0.9},
		{"gamma above one", ErrBounds, ring.g, out.g, 0, win, 4, 1.0000001},
		{"gamma negative", ErrBounds, ring.g, out.g, 0, win, 4, -0.1},
		{"gamma NaN", ErrBounds, ring.g, out.g, 0, win, 4, math.NaN()},
		{"negative offset", ErrBounds, ring.g, out.g, -4, win, 4, 0.9},
		{"misaligned offset", ErrBounds, ring.g, out.g, 2, win, 4, 0.9},
		{"offset past end", ErrBounds, ring.g, out.g, 36, nil, 4, 0.9},
		{"sums past end", ErrBounds, ring.g, out.g, 4, make([]kernels.Window, 8), 4, 0.9},
		{"row past ring", ErrBounds, ring.g, out.g, 0, []kernels.Window{{Row: 4, Len: 1}}, 4, 0.9},
		{"negative row", ErrBounds, ring.g, out.g, 0, []kernels.Window{{Row: -1, Len: 1}}, 4, 0.9},
		{"negative start", ErrBounds, ring.g, out.g, 0, []kernels.Window{{Start: -1, Len: 1}}, 4, 0.9},
		{"negative length", ErrBounds, ring.g, out.g, 0, []kernels.Window{{Len: -1}}, 4, 0.9},
		{"length past capacity", ErrBounds, ring.g, out.g, 0, []kernels.Window{{Len: 5}}, 4, 0.9},
		{"second window bad", ErrBounds, ring.g, out.g, 0, []kernels.Window{{Len: 4}, {Row: 0, Len: 5}}, 4, 0.9},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before := b.Launches()
			err := b.NStepReward(tc.ring, tc.out, tc.off, tc.wins, tc.capacity, tc.gamma)
			if !errors.Is(err, tc.err) {
				t.Fatalf("NStepReward: %v, want %v", err, tc.err)
			}
			if l := b.Launches(); l != before {
				t.Errorf("a failed call launched %d kernels", l-before)
			}
			p.same("output after a failed call", out)
		})
	}
	// The largest valid call fills the output exactly.
	full := make([]kernels.Window, 8)
	for i := range full {
		full[i] = kernels.Window{Row: int64(i % 4), Start: int64(i), Len: int64(i % 5)}
	}
	if err := b.NStepReward(ring.g, out.g, 0, full, 4, 1); err != nil {
		t.Fatalf("output filled exactly: %v", err)
	}
	if err := p.c.NStepReward(ring.c, out.c, 0, full, 4, 1); err != nil {
		t.Fatal(err)
	}
	p.same("output filled exactly", out)
}

// TestLaunches checks the launch counter: one per operation with work,
// none for empty ones or failed ones.
func TestLaunches(t *testing.T) {
	b := newBackend(t)
	p := newPair(t, b, 11)
	ring := p.arena(64)
	out := p.arena(64)
	col := []kernels.Column{{Ring: ring.g, StepBytes: 4, Out: out.g}}
	win := []kernels.Window{{Row: 0, Start: 1, Len: 2}}
	tests := []struct {
		name string
		want int64
		call func() error
	}{
		{"scatter", 1, func() error { return b.Scatter(col, [][]byte{make([]byte, 8)}, []int64{0, 1}) }},
		{"empty scatter", 0, func() error { return b.Scatter(col, [][]byte{nil}, nil) }},
		{"gather rows", 1, func() error { return b.GatherRows(col, []int64{3, 1}) }},
		{"concat", 1, func() error { return b.Concat(col, []int64{3}, []int64{4}) }},
		{"gather windows", 1, func() error { return b.GatherWindows(col, win, 2, 4, nil, 0) }},
		{"n-step reward", 1, func() error { return b.NStepReward(ring.g, out.g, 0, win, 4, 0.9) }},
		{"empty n-step reward", 0, func() error { return b.NStepReward(ring.g, out.g, 0, nil, 4, 0.9) }},
		{"upload", 0, func() error { return b.Upload(out.g, 0, make([]byte, 8)) }},
		{"failed gather", 0, func() error { return b.GatherRows(col, []int64{16}) }},
	}
	for _, tc := range tests {
		before := b.Launches()
		if err := tc.call(); err != nil && tc.name != "failed gather" {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if got := b.Launches() - before; got != tc.want {
			t.Errorf("%s: %d launches, want %d", tc.name, got, tc.want)
		}
	}
}

// TestNStepRewardConcurrent runs n-step sums from several goroutines into
// disjoint parts of one output (run with -race) and checks every part
// against the cpu reference.
func TestNStepRewardConcurrent(t *testing.T) {
	b := newBackend(t)
	p := newPair(t, b, 13)
	const rows, capacity, workers, per = 4, 16, 4, 64
	ring := p.rewards(rows, capacity, false)
	out := p.arena(4 * workers * per)
	wins := make([][]kernels.Window, workers)
	for w := range wins {
		wins[w] = make([]kernels.Window, per)
		for i := range wins[w] {
			wins[w][i] = kernels.Window{Row: p.rng.Int64N(rows), Start: p.rng.Int64N(100), Len: p.rng.Int64N(capacity + 1)}
		}
	}
	errs := make(chan error, workers)
	for w := range workers {
		go func() {
			for range 20 {
				if err := b.NStepReward(ring.g, out.g, int64(4*w*per), wins[w], capacity, 0.97); err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		}()
	}
	for range workers {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	for w := range workers {
		if err := p.c.NStepReward(ring.c, out.c, int64(4*w*per), wins[w], capacity, 0.97); err != nil {
			t.Fatal(err)
		}
	}
	p.same("concurrent n-step sums", out)
}

// BenchmarkNStepReward times the n-step reward kernel on B windows of 5
// steps from a reward ring of 1M steps (16 rows), and in the same run the
// path tensorbuf takes for a backend without it: gather the windows'
// rewards (GatherWindows), Sync, download, sum on the host, upload. It
// reports us/op of both and fallback_x = t(fallback) / t(kernel). With
// -short the ring is small, for smoke runs on the stand-in driver.
func BenchmarkNStepReward(b *testing.B) {
	be := newBackend(b)
	for _, batch := range []int64{256, 65536} {
		b.Run(fmt.Sprintf("B%d/n5/1M", batch), func(b *testing.B) { benchNStep(b, be, batch, 5) })
	}
}

func benchNStep(b *testing.B, be *Backend, batch, n int64) {
	rows, capacity := int64(16), int64(1<<16)
	if testing.Short() {
		capacity, batch = 256, min(batch, 1024)
	}
	rng := rand.New(rand.NewPCG(3, 4))
	ring, err := be.Alloc(4 * rows * capacity)
	if err != nil {
		b.Fatal(err)
	}
	defer be.Free(ring)
	out, err := be.Alloc(4 * batch)
	if err != nil {
		b.Fatal(err)
	}
	defer be.Free(out)
	scratch, err := be.Alloc(4 * batch * n)
	if err != nil {
		b.Fatal(err)
	}
	defer be.Free(scratch)
	sets := make([][]kernels.Window, rotations)
	for s := range sets {
		sets[s] = make([]kernels.Window, batch)
		for i := range sets[s] {
			sets[s][i] = kernels.Window{Row: rng.Int64N(rows), Start: rng.Int64N(capacity), Len: 1 + rng.Int64N(n)}
		}
	}
	const gamma = 0.99
	if err := be.Sync(); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	start := time.Now()
	for i := range b.N {
		if err := be.NStepReward(ring, out, 0, sets[i%rotations], capacity, gamma); err != nil {
			b.Fatal(err)
		}
	}
	if err := be.Sync(); err != nil {
		b.Fatal(err)
	}
	kernel := time.Since(start)
	b.StopTimer()
	rew := make([]float32, batch*n)
	sums := make([]float32, batch)
	cols := []kernels.Column{{Ring: ring, StepBytes: 4, Out: scratch}}
	start = time.Now()
	for i := range b.N {
		wins := sets[i%rotations]
		if err := be.GatherWindows(cols, wins, n, capacity, nil, 0); err != nil {
			b.Fatal(err)
		}
		if err := be.Download(f32Bytes(rew), scratch, 0); err != nil {
			b.Fatal(err)
		}
		for w, win := range wins {
			s, g := 0.0, 1.0
			for j := range win.Len {
				s = float64(s + float64(g*float64(rew[int64(w)*n+j])))
				g = float64(g * gamma)
			}
			sums[w] = float32(s)
		}
		if err := be.Upload(out, 0, f32Bytes(sums)); err != nil {
			b.Fatal(err)
		}
	}
	if err := be.Sync(); err != nil {
		b.Fatal(err)
	}
	fallback := time.Since(start)
	b.ReportMetric(float64(kernel.Microseconds())/float64(b.N), "kernel_us/op")
	b.ReportMetric(float64(fallback.Microseconds())/float64(b.N), "fallback_us/op")
	b.ReportMetric(fallback.Seconds()/kernel.Seconds(), "fallback_x")
}
