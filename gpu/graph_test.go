//go:build trajring_cuda

package gpu

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"gorgonia.org/tensor"
)

// adamArrays are an Adam step's operands: w, g, m, v and the clipping
// factor.
type adamArrays struct{ w, g, m, v, sc *devArr }

func newAdamArrays(t *testing.T, b *Backend, rng *rand.Rand, n int) adamArrays {
	t.Helper()
	v := randF32(rng, n)
	for i := range v {
		v[i] = float32(math.Abs(float64(v[i])))
	}
	f32 := tensor.Float32
	return adamArrays{w: upload(t, b, rng, f32, randF32(rng, n)), g: upload(t, b, rng, f32, randF32(rng, n)),
		m: upload(t, b, rng, f32, randF32(rng, n)), v: upload(t, b, rng, f32, v), sc: upload(t, b, rng, f32, []float32{0.61})}
}

// copyTo queues copies of a's arrays (guards included) into c's.
func (a adamArrays) copyTo(t *testing.T, b *Backend, c adamArrays) {
	t.Helper()
	for _, p := range [][2]*devArr{{a.w, c.w}, {a.g, c.g}, {a.m, c.m}, {a.v, c.v}, {a.sc, c.sc}} {
		if err := b.Copy(p[1].a, 0, p[0].a, 0, int64(len(p[0].init))); err != nil {
			t.Fatal(err)
		}
	}
}

// download returns the bytes of an array's arena.
func download(t *testing.T, b *Backend, d *devArr) []byte {
	t.Helper()
	out := make([]byte, len(d.init))
	if err := b.Download(out, d.a, 0); err != nil {
		t.Fatal(err)
	}
	return out
}

// sameAdam fails unless a's and c's parameters and moments are equal.
func sameAdam(t *testing.T, b *Backend, what string, a, c adamArrays) {
	t.Helper()
	for i, p := range [][2]*devArr{{a.w, c.w}, {a.m, c.m}, {a.v, c.v}} {
		if !bytes.Equal(download(t, b, p[0]), download(t, b, p[1])) {
			t.Fatalf("%s: %s differs", what, []string{"w", "m", "v"}[i])
		}
	}
}

// newHyper uploads an Adam hyper block for rate lr after t steps.
func newHyper(t *testing.T, b *Backend, rng *rand.Rand, lr float64, steps int64) *devArr {
	t.Helper()
	raw := AdamHyper(lr, steps)
	words := make([]uint64, len(raw)/8)
	copy(bytesOf(words), raw)
	return upload(t, b, rng, tensor.Uint64, words)
}

// hyperWord reads word i of a hyper block.
func hyperWord(t *testing.T, b *Backend, h *devArr, i int) uint64 {
	t.Helper()
	raw := download(t, b, h)
	off := (learnGuard + i) * 8
	return uint64(raw[off]) | uint64(raw[off+1])<<8 | uint64(raw[off+2])<<16 | uint64(raw[off+3])<<24 |
		uint64(raw[off+4])<<32 | uint64(raw[off+5])<<40 | uint64(raw[off+6])<<48 | uint64(raw[off+7])<<56
}

// TestAdamDeviceIsAdam: AdamDevice, its rate and step count in a hyper
// block, writes Adam's bytes step after step (including steps past the
// block's table, and a new rate uploaded between steps), and advances
// the block's count by one a launch, its tickets back at 0, on every
// grid.
func TestAdamDeviceIsAdam(t *testing.T) { forGrids(t, testAdamDeviceIsAdam) }

func testAdamDeviceIsAdam(t *testing.T, b *Backend) {
	rng := rand.New(rand.NewPCG(5, 9))
	for _, t0 := range []int64{0, 17, int64(AdamHyperWords())} {
		n := 1 + rng.IntN(3000)
		dev, ref := newAdamArrays(t, b, rng, n), newAdamArrays(t, b, rng, n)
		dev.copyTo(t, b, ref)
		lr := 2.3e-3
		h := newHyper(t, b, rng, lr, t0)
		for step := range int64(5) {
			if step == 3 {
				lr = 7e-4
				off, raw := AdamHyperRate(lr)
				if err := b.Upload(h.a, int64(learnGuard*8)+off, raw); err != nil {
					t.Fatal(err)
				}
			}
			sc := dev.sc.t
			if step == 2 {
				sc = nil
			}
			if err := b.AdamDevice(dev.w.t, dev.g.t, dev.m.t, dev.v.t, n, sc, h.t); err != nil {
				t.Fatal(err)
			}
			if sc != nil {
				sc = ref.sc.t
			}
			if err := b.Adam(ref.w.t, ref.g.t, ref.m.t, ref.v.t, n, sc, lr, t0+step+1); err != nil {
				t.Fatal(err)
			}
			sameAdam(t, b, "AdamDevice and Adam", dev, ref)
			if got := hyperWord(t, b, h, adamHyperT); got != uint64(t0+step+1) {
				t.Fatalf("step count %d after step %d from %d", got, step, t0)
			}
			if got := hyperWord(t, b, h, adamHyperTicket); got != 0 {
				t.Fatalf("tickets %d after a launch", got)
			}
		}
	}
}

// TestGraphReplaysCapturedWork: a captured Adam step runs nothing at
// capture and counts no launch; each Launch replays it as captured (one
// launch counted, one cuGraphLaunch for the stand-in): the by-value
// constants frozen at capture (every replay is step 1, as a real driver
// would replay it), while a step reading its constants from a hyper block
// advances at every replay, as Adam's steps 1, 2, 3 do.
func TestGraphReplaysCapturedWork(t *testing.T) {
	b := newBackend(t)
	rng := rand.New(rand.NewPCG(3, 4))
	const n, lr = 777, 1e-3
	frozen, ref := newAdamArrays(t, b, rng, n), newAdamArrays(t, b, rng, n)
	frozen.copyTo(t, b, ref)
	before := download(t, b, frozen.w)
	l0 := b.Launches()
	g, err := b.CaptureGraph(func() error { return b.Adam(frozen.w.t, frozen.g.t, frozen.m.t, frozen.v.t, n, frozen.sc.t, lr, 1) })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = g.Close() })
	if !bytes.Equal(download(t, b, frozen.w), before) || b.Launches() != l0 || g.Kernels() != 1 {
		t.Fatalf("capture ran or counted its launch: %d launches, %d kernels captured", b.Launches()-l0, g.Kernels())
	}
	s0, standin := StandinGraphLaunches()
	for range 3 {
		if err := g.Launch(); err != nil {
			t.Fatal(err)
		}
		if err := b.Adam(ref.w.t, ref.g.t, ref.m.t, ref.v.t, n, ref.sc.t, lr, 1); err != nil {
			t.Fatal(err)
		}
	}
	sameAdam(t, b, "replays of a captured step 1 and three steps 1", frozen, ref)
	if b.Launches()-l0 != 6 || g.Launches() != 3 {
		t.Errorf("%d launches counted, %d graph launches; want 6 and 3", b.Launches()-l0, g.Launches())
	}
	if s1, _ := StandinGraphLaunches(); standin && s1-s0 != 3 {
		t.Errorf("the stand-in counted %d graph launches, want 3", s1-s0)
	}

	dev, ref2 := newAdamArrays(t, b, rng, n), newAdamArrays(t, b, rng, n)
	dev.copyTo(t, b, ref2)
	h := newHyper(t, b, rng, lr, 0)
	gd, err := b.CaptureGraph(func() error { return b.AdamDevice(dev.w.t, dev.g.t, dev.m.t, dev.v.t, n, dev.sc.t, h.t) })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = gd.Close() })
	for step := range int64(3) {
		if err := gd.Launch(); err != nil {
			t.Fatal(err)
		}
		if err := b.Adam(ref2.w.t, ref2.g.t, ref2.m.t, ref2.v.t, n, ref2.sc.t, lr, step+1); err != nil {
			t.Fatal(err)
		}
	}
	sameAdam(t, b, "replays of AdamDevice and steps 1, 2, 3", dev, ref2)
	if err := gd.Close(); err != nil {
		t.Fatal(err)
	}
	if err := gd.Launch(); !errors.Is(err, ErrClosed) {
		t.Fatalf("Launch after Close: %v, want ErrClosed", err)
	}
}

// TestGraphCaptureIsStrict: what a capture cannot record fails as on a
// real driver (CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, 900) and fails the
// capture: a wait for the stream (Sync), an allocation, and (on the
// stand-in, stricter there than a driver) an upload through staging (its
// event record); nothing queued in the failed
// capture runs, and the backend works as before afterwards.
func TestGraphCaptureIsStrict(t *testing.T) {
	b := newBackend(t)
	rng := rand.New(rand.NewPCG(8, 1))
	const n = 300
	a := newAdamArrays(t, b, rng, n)
	before := download(t, b, a.w)
	adam := func() error { return b.Adam(a.w.t, a.g.t, a.m.t, a.v.t, n, nil, 1e-3, 1) }
	for _, tc := range []struct {
		name string
		call func() error
	}{
		{"Sync", b.Sync},
		{"Alloc", func() error {
			x, err := b.Alloc(64)
			if err == nil {
				_ = b.Free(x)
			}
			return err
		}},
		{"Upload", func() error { return b.Upload(a.g.a, 0, []byte{1, 2, 3}) }},
	} {
		if _, standin := StandinGraphLaunches(); tc.name == "Upload" && !standin {
			// A real driver records the staging copy and its event
			// (a graph reading a staging slot later reused): the
			// stand-in refuses the event record, the driver does not.
			continue
		}
		var callErr error
		g, err := b.CaptureGraph(func() error {
			if err := adam(); err != nil {
				return err
			}
			callErr = tc.call()
			return callErr
		})
		if err == nil || g != nil {
			t.Fatalf("%s in a capture: the capture succeeded", tc.name)
		}
		if c := code(callErr); c != 900 && !strings.Contains(fmt.Sprint(callErr), "CUresult 900") {
			t.Errorf("%s in a capture: %v (CUDA error %d), want CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED (900)", tc.name, callErr, c)
		}
		if err := b.Sync(); err != nil {
			t.Fatalf("Sync after a failed capture: %v", err)
		}
		if !bytes.Equal(download(t, b, a.w), before) {
			t.Fatalf("%s: work queued in a failed capture ran", tc.name)
		}
	}
	if err := adam(); err != nil {
		t.Fatal(err)
	}
	if err := b.Sync(); err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(download(t, b, a.w), before) {
		t.Fatal("Adam after the failed captures did not run")
	}
}

// TestGraphCaptureDefersFrees: an arena freed by another goroutine while
// a capture records the stream (as the library's cleanups free dropped
// memory) does not invalidate the capture: Free returns at once, the
// arena is gone for every caller, and its memory is freed once the
// capture ends.
func TestGraphCaptureDefersFrees(t *testing.T) {
	b := newBackend(t)
	rng := rand.New(rand.NewPCG(5, 6))
	const n = 200
	a := newAdamArrays(t, b, rng, n)
	x, err := b.Alloc(4096)
	if err != nil {
		t.Fatal(err)
	}
	var freeErr error
	g, err := b.CaptureGraph(func() error {
		if err := b.Adam(a.w.t, a.g.t, a.m.t, a.v.t, n, nil, 1e-3, 1); err != nil {
			return err
		}
		done := make(chan struct{})
		go func() { freeErr = b.Free(x); close(done) }()
		<-done
		b.mu.Lock()
		waiting := len(b.deferred)
		b.mu.Unlock()
		if waiting != 1 {
			return fmt.Errorf("%d arenas wait for the capture's end, want 1", waiting)
		}
		return nil
	})
	if err != nil || freeErr != nil {
		t.Fatalf("capture: %v; the free during it: %v", err, freeErr)
	}
	t.Cleanup(func() { _ = g.Close() })
	b.mu.Lock()
	waiting := len(b.deferred)
	b.mu.Unlock()
	if waiting != 0 {
		t.Fatalf("%d arenas still wait after the capture", waiting)
	}
	if err := b.Free(x); err == nil {
		t.Fatal("a second Free of the arena freed during the capture succeeded")
	}
	before := download(t, b, a.w)
	if err := g.Launch(); err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(download(t, b, a.w), before) {
		t.Fatal("the captured step did not run")
	}
}

// TestGraphDestroyedByBackendClose: a graph its caller never closed is
// destroyed by the backend's Close, after which the graph's Close and
// Launch are harmless.
func TestGraphDestroyedByBackendClose(t *testing.T) {
	b, err := New()
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(9, 10))
	const n = 64
	a := newAdamArrays(t, b, rng, n)
	g, err := b.CaptureGraph(func() error { return b.Adam(a.w.t, a.g.t, a.m.t, a.v.t, n, nil, 1e-3, 1) })
	if err != nil {
		t.Fatal(err)
	}
	b.mu.Lock()
	live := len(b.graphs)
	b.mu.Unlock()
	if live != 1 {
		t.Fatalf("%d graphs tracked, want 1", live)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if g.exec != nil || b.graphs != nil {
		t.Fatal("Close left the graph alive")
	}
	if err := g.Close(); err != nil {
		t.Fatalf("Close of a graph after its backend's: %v", err)
	}
	if err := g.Launch(); !errors.Is(err, ErrClosed) {
		t.Fatalf("Launch after Close: %v, want ErrClosed", err)
	}
}
