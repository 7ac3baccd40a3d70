//go:build trajring_cuda

package gpu

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
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

// TestAdamDeviceEmptyAdvances: AdamDevice with no parameters (n == 0)
// still advances the hyper block's step count by one a call (its tickets
// back at 0) and touches nothing else, called directly and replayed from
// a graph, so the device's count stays the caller's count of steps.
func TestAdamDeviceEmptyAdvances(t *testing.T) { forGrids(t, testAdamDeviceEmptyAdvances) }

func testAdamDeviceEmptyAdvances(t *testing.T, b *Backend) {
	rng := rand.New(rand.NewPCG(12, 13))
	a := newAdamArrays(t, b, rng, 0)
	h := newHyper(t, b, rng, 1e-3, 4)
	steps := uint64(4)
	check := func(what string) {
		t.Helper()
		if got := hyperWord(t, b, h, adamHyperT); got != steps {
			t.Fatalf("%s: step count %d, want %d", what, got, steps)
		}
		if got := hyperWord(t, b, h, adamHyperTicket); got != 0 {
			t.Fatalf("%s: tickets %d after a launch", what, got)
		}
		for i, d := range []*devArr{a.w, a.g, a.m, a.v, a.sc} {
			if !bytes.Equal(download(t, b, d), d.init) {
				t.Fatalf("%s: an empty step changed %s", what, []string{"w", "g", "m", "v", "scale"}[i])
			}
		}
	}
	for _, sc := range []*tensor.Dense{a.sc.t, nil} {
		l0 := b.Launches()
		if err := b.AdamDevice(a.w.t, a.g.t, a.m.t, a.v.t, 0, sc, h.t); err != nil {
			t.Fatal(err)
		}
		steps++
		if n := b.Launches() - l0; n != 1 {
			t.Fatalf("an empty AdamDevice counted %d launches, want 1", n)
		}
		check("AdamDevice(n=0)")
	}
	g, err := b.CaptureGraph(func() error { return b.AdamDevice(a.w.t, a.g.t, a.m.t, a.v.t, 0, a.sc.t, h.t) })
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = g.Close() }()
	if g.Kernels() != 1 {
		t.Fatalf("the capture of an empty AdamDevice holds %d kernels, want 1", g.Kernels())
	}
	for range 3 {
		if err := g.Launch(); err != nil {
			t.Fatal(err)
		}
		steps++
	}
	check("3 replays of AdamDevice(n=0)")
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
// capture: a wait for the stream (Sync), an allocation; an upload (a real
// driver would record the copy from a staging slot that is reused later)
// is refused by the backend itself (ErrDriver) on every driver; nothing
// queued in the failed capture runs, and the backend works as before
// afterwards.
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
		if tc.name == "Upload" {
			if !errors.Is(callErr, ErrDriver) || !strings.Contains(fmt.Sprint(callErr), "during a graph capture") {
				t.Errorf("Upload in a capture: %v, want the backend's refusal (ErrDriver)", callErr)
			}
		} else if c := code(callErr); c != 900 && !strings.Contains(fmt.Sprint(callErr), "CUresult 900") {
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
		var uploadErr, launchErr error
		go func() {
			// Another goroutine: its Free waits for the capture's end, its
			// other calls are refused (they would be captured).
			freeErr = b.Free(x)
			uploadErr = b.Upload(a.w.a, 0, make([]byte, 8))
			launchErr = b.Adam(a.w.t, a.g.t, a.m.t, a.v.t, n, nil, 1e-3, 2)
			close(done)
		}()
		<-done
		if !errors.Is(uploadErr, ErrCapturing) || !errors.Is(launchErr, ErrCapturing) {
			return fmt.Errorf("another goroutine's upload and launch during the capture: %v, %v; want ErrCapturing", uploadErr, launchErr)
		}
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

// TestGraphCaptureClosedDuringRecord: a record func that closes the
// backend fails the capture with ErrClosed, and leaves no stream
// capturing, no graph and no device memory behind (the stand-in's
// counts); the backend stays closed.
func TestGraphCaptureClosedDuringRecord(t *testing.T) {
	st0, standin := standinGraphs()
	b, err := New()
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(14, 15))
	const n = 100
	a := newAdamArrays(t, b, rng, n)
	spare, err := b.Alloc(64)
	if err != nil {
		t.Fatal(err)
	}
	var closeErr, freeErr error
	g, err := b.CaptureGraph(func() error {
		if err := b.Adam(a.w.t, a.g.t, a.m.t, a.v.t, n, nil, 1e-3, 1); err != nil {
			return err
		}
		freeErr = b.Free(spare) // deferred to the capture's end
		closeErr = b.Close()
		return nil
	})
	if g != nil || !errors.Is(err, ErrClosed) {
		t.Fatalf("capture closed by its record func: graph %v, error %v; want ErrClosed", g != nil, err)
	}
	// Close cannot wait for a capturing stream (a real driver refuses,
	// 900): it returns nil and the capture's end frees everything, the
	// arena freed during the capture included.
	if closeErr != nil || freeErr != nil {
		t.Errorf("Close during the capture: %v; Free during it: %v; want nil, nil", closeErr, freeErr)
	}
	b.mu.Lock()
	capturing := b.capturing
	b.mu.Unlock()
	if capturing {
		t.Error("the backend still reports a capture")
	}
	if st, _ := standinGraphs(); standin && st != st0 {
		t.Errorf("stand-in after the capture: %+v, before the backend: %+v (streams capturing, graphs, executable graphs, allocations)", st, st0)
	}
	if err := b.Close(); !errors.Is(err, ErrClosed) {
		t.Errorf("Close after the capture: %v, want ErrClosed", err)
	}
}

// TestGraphCaptureEndsAfterStickyFault: when a sticky fault is seen
// while record runs (another backend's kernel faults, the stand-in's
// TRAJRING_STANDIN_FAULT_LAUNCH), CaptureGraph still ends the capture:
// it fails with ErrDeviceLost (or ErrClosed when record also closed the
// backend, which on a lost device frees nothing), and the stand-in shows
// no stream left capturing and no graph left alive. Each case runs in a
// process of its own (the fault is process-wide).
func TestGraphCaptureEndsAfterStickyFault(t *testing.T) {
	onStandin(t)
	const name = "TestGraphCaptureEndsAfterStickyFault"
	if os.Getenv("TRAJRING_GPU_CHILD") == name {
		captureFaultChild(t, os.Getenv("TRAJRING_GRAPH_CHILD_MODE"))
		return
	}
	for _, mode := range []string{"lost", "lost+close"} {
		t.Run(mode, func(t *testing.T) {
			out, err, _ := child(t, name, "TRAJRING_STANDIN_FAULT_LAUNCH=1", "TRAJRING_GRAPH_CHILD_MODE="+mode)
			if err != nil || !strings.Contains(out, "PASS") {
				t.Fatalf("child: %v\n%s", err, out)
			}
		})
	}
}

// captureFaultChild is TestGraphCaptureEndsAfterStickyFault's body in its
// child process, whose first kernel launch to run faults.
func captureFaultChild(t *testing.T, mode string) {
	b, err := New()
	if err != nil {
		t.Fatal(err)
	}
	b2, err := New()
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(16, 17))
	const n = 100
	a, a2 := newAdamArrays(t, b, rng, n), newAdamArrays(t, b2, rng, n)
	st0, _ := standinGraphs()
	var faultErr, closeErr error
	g, err := b.CaptureGraph(func() error {
		if err := b.Adam(a.w.t, a.g.t, a.m.t, a.v.t, n, nil, 1e-3, 1); err != nil {
			return err
		}
		// The other backend's kernel runs (and faults) on another
		// thread: this one's thread-local capture forbids the wait.
		done := make(chan struct{})
		go func() {
			defer close(done)
			if faultErr = b2.Adam(a2.w.t, a2.g.t, a2.m.t, a2.v.t, n, nil, 1e-3, 1); faultErr == nil {
				faultErr = b2.Sync()
			}
		}()
		<-done
		if mode == "lost+close" {
			closeErr = b.Close()
		}
		return nil
	})
	if !errors.Is(faultErr, ErrDeviceLost) {
		t.Fatalf("the injected fault: %v, want ErrDeviceLost", faultErr)
	}
	want := ErrDeviceLost
	if mode == "lost+close" {
		want = ErrClosed
		if !errors.Is(closeErr, ErrDeviceLost) {
			t.Errorf("Close on the lost device: %v, want ErrDeviceLost", closeErr)
		}
	}
	if g != nil || !errors.Is(err, want) {
		t.Fatalf("capture during a sticky fault: graph %v, error %v; want %v", g != nil, err, want)
	}
	st, _ := standinGraphs()
	if st.captures != st0.captures || st.graphs != st0.graphs || st.execs != st0.execs {
		t.Fatalf("stand-in after the capture: %+v, before it: %+v (streams capturing, graphs, executable graphs): "+
			"the capture was left open or its graph alive", st, st0)
	}
	if err := b.Health(); err == nil {
		t.Error("Health after the fault: nil")
	}
}

// TestGraphReplayOfFreedMemoryFaults: a graph replayed after memory it
// was captured with is freed faults as on a GPU, with the sticky
// CUDA_ERROR_ILLEGAL_ADDRESS (700) when the replay runs, which the next
// wait and Health report as ErrDeviceLost: a kernel node (an Adam step
// whose moment is freed) and a copy node (its source freed). The replay
// works while the memory lives. Each case runs in a process of its own
// (the fault is process-wide).
func TestGraphReplayOfFreedMemoryFaults(t *testing.T) {
	onStandin(t)
	const name = "TestGraphReplayOfFreedMemoryFaults"
	if os.Getenv("TRAJRING_GPU_CHILD") == name {
		replayFreedChild(t, os.Getenv("TRAJRING_GRAPH_CHILD_MODE"))
		return
	}
	for _, mode := range []string{"kernel", "copy"} {
		t.Run(mode, func(t *testing.T) {
			out, err, _ := child(t, name, "TRAJRING_GRAPH_CHILD_MODE="+mode)
			if err != nil || !strings.Contains(out, "PASS") {
				t.Fatalf("child: %v\n%s", err, out)
			}
		})
	}
}

// replayFreedChild is TestGraphReplayOfFreedMemoryFaults's body in its
// child process.
func replayFreedChild(t *testing.T, mode string) {
	b, err := New()
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(18, 19))
	const n = 300
	var record func() error
	var victim, out *devArr
	switch mode {
	case "kernel":
		a := newAdamArrays(t, b, rng, n)
		record = func() error { return b.Adam(a.w.t, a.g.t, a.m.t, a.v.t, n, nil, 1e-3, 1) }
		victim, out = a.m, a.w
	case "copy":
		victim = upload(t, b, rng, tensor.Float32, randF32(rng, n))
		out = upload(t, b, rng, tensor.Float32, randF32(rng, n))
		record = func() error { return b.Copy(out.a, 0, victim.a, 0, int64(len(victim.init))) }
	default:
		t.Fatalf("mode %q", mode)
	}
	g, err := b.CaptureGraph(record)
	if err != nil {
		t.Fatal(err)
	}
	before := download(t, b, out)
	if err := g.Launch(); err != nil {
		t.Fatal(err)
	}
	if err := b.Sync(); err != nil {
		t.Fatalf("replay with its memory alive: %v", err)
	}
	if bytes.Equal(download(t, b, out), before) {
		t.Fatal("the replay with its memory alive changed nothing")
	}
	if err := b.Free(victim.a); err != nil {
		t.Fatal(err)
	}
	if err := g.Launch(); err != nil {
		t.Fatalf("Launch of a graph whose memory was freed: %v (the driver checks nothing at launch)", err)
	}
	err = b.Sync()
	if !errors.Is(err, ErrDeviceLost) || !errors.Is(err, ErrDriver) || !strings.Contains(err.Error(), "CUDA error 700") {
		t.Fatalf("Sync after replaying freed memory: %v, want ErrDeviceLost with CUDA error 700", err)
	}
	if err := b.Health(); !errors.Is(err, ErrDeviceLost) {
		t.Errorf("Health after the fault: %v, want ErrDeviceLost", err)
	}
	if err := g.Launch(); !errors.Is(err, ErrDeviceLost) {
		t.Errorf("Launch after the fault: %v, want ErrDeviceLost", err)
	}
}
