//go:build trajring_cuda

package gpu

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"

	"github.com/trajring/trajring/kernels"
	"gorgonia.org/cu"
	"gorgonia.org/tensor"
)

// child runs the test named name again in a fresh process with env set
// and TRAJRING_GPU_CHILD=name, and returns its output and exit error; in
// that child it returns ("", nil) and ok false, so the caller runs the
// child's body instead.
func child(t *testing.T, name string, env ...string) (out string, err error, parent bool) {
	t.Helper()
	if os.Getenv("TRAJRING_GPU_CHILD") == name {
		return "", nil, false
	}
	cmd := exec.Command(os.Args[0], "-test.run=^"+name+"$", "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), append([]string{"TRAJRING_GPU_CHILD=" + name}, env...)...)
	b, err := cmd.CombinedOutput()
	return string(b), err, true
}

func mustArena(t *testing.T, b *Backend, data []byte) kernels.Arena {
	t.Helper()
	a, err := b.Alloc(int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Upload(a, 0, data); err != nil {
		t.Fatal(err)
	}
	return a
}

func TestDeviceTensorsRefuseHostOps(t *testing.T) {
	b := newBackend(t)
	a := mustArena(t, b, make([]byte, 64))
	d, err := b.Tensor(a, 0, tensor.Float32, 4, 4)
	if err != nil {
		t.Fatal(err)
	}
	if !IsDevice(d) || d.IsNativelyAccessible() {
		t.Fatalf("device tensor: IsDevice %v, natively accessible %v", IsDevice(d), d.IsNativelyAccessible())
	}
	host := tensor.New(tensor.WithShape(4, 4), tensor.Of(tensor.Float32))
	if IsDevice(host) {
		t.Fatal("host tensor reported as device")
	}
	ops := []struct {
		name string
		f    func() error
	}{
		{"Add", func() error { _, err := tensor.Add(d, d); return err }},
		{"Mul scalar", func() error { _, err := tensor.Mul(d, float32(2)); return err }},
		{"Memset", func() error { return d.Memset(float32(1)) }},
		{"Sum", func() error { _, err := tensor.Sum(d); return err }},
		{"Clone", func() (err error) {
			defer func() {
				if r := recover(); r != nil {
					err, _ = r.(error)
				}
			}()
			_ = d.Clone()
			return nil
		}},
	}
	for _, op := range ops {
		if err := op.f(); err == nil {
			t.Errorf("%s on a device tensor: no error", op.name)
		}
	}
	if got := d.Shape(); !got.Eq(tensor.Shape{4, 4}) || d.Dtype() != tensor.Float32 {
		t.Errorf("shape %v dtype %v", got, d.Dtype())
	}
}

// TestDeviceMemoryUnreadableOnHost proves the stand-in's protection: a
// host read of device memory (a device tensor's Data) kills the process,
// as it does on a GPU, so such a read cannot pass the cuda tests.
func TestDeviceMemoryUnreadableOnHost(t *testing.T) {
	out, err, parent := child(t, "TestDeviceMemoryUnreadableOnHost")
	if parent {
		if err == nil || !strings.Contains(out, "SIGSEGV") {
			t.Fatalf("host read of device memory did not fault: err %v\n%s", err, out)
		}
		return
	}
	b := newBackend(t)
	a := mustArena(t, b, make([]byte, 64))
	if err := b.Sync(); err != nil {
		t.Fatal(err)
	}
	d, err := b.Tensor(a, 0, tensor.Float32, 16)
	if err != nil {
		t.Fatal(err)
	}
	v := d.Data().([]float32)[3] // faults
	t.Logf("read %v from device memory", v)
}

// onStandin skips a test that relies on the stand-in driver's test hooks
// or deterministic scheduling.
func onStandin(t *testing.T) {
	t.Helper()
	if _, ok := StandinDeviceTime(); !ok {
		t.Skip("needs the stand-in driver (test hooks, deterministic stream order)")
	}
}

// TestStickyFaultIsReportedAndFailsFast: a sticky fault (an illegal
// address, a device-side assert, a launch failure), injected into a
// kernel launch by the stand-in, is reported as ErrDeviceLost by the next
// call that waits, by Health and by every later call of every backend,
// each in a process of its own (the fault is process-wide).
func TestStickyFaultIsReportedAndFailsFast(t *testing.T) {
	onStandin(t)
	const name = "TestStickyFaultIsReportedAndFailsFast"
	if os.Getenv("TRAJRING_GPU_CHILD") == name {
		stickyFaultChild(t, os.Getenv("TRAJRING_STANDIN_FAULT_CODE"))
		return
	}
	for _, code := range []string{"700", "710", "719"} {
		t.Run(code, func(t *testing.T) {
			out, err, _ := child(t, name, "TRAJRING_STANDIN_FAULT_LAUNCH=2", "TRAJRING_STANDIN_FAULT_CODE="+code)
			if err != nil {
				t.Fatalf("child: %v\n%s", err, out)
			}
		})
	}
}

// stickyFaultChild is the body of TestStickyFaultIsReportedAndFailsFast
// in its child process, whose second launch faults with CUDA error code.
func stickyFaultChild(t *testing.T, code string) {
	b, err := New()
	if err != nil {
		t.Fatal(err)
	}
	ring := mustArena(t, b, bytes.Repeat([]byte{7}, 64))
	out1, err := b.Alloc(64)
	if err != nil {
		t.Fatal(err)
	}
	cols := []kernels.Column{{Ring: ring, Out: out1, StepBytes: 16}}
	for i := range 2 { // the second launch faults when it runs
		if err := b.GatherRows(cols, []int64{int64(i)}); err != nil {
			t.Fatalf("launch %d: %v", i, err)
		}
	}
	if err := b.Health(); err != nil {
		t.Fatalf("Health before the fault ran: %v", err)
	}
	err = b.Sync()
	if !errors.Is(err, ErrDeviceLost) || !errors.Is(err, ErrDriver) || !strings.Contains(err.Error(), "CUDA error "+code) {
		t.Fatalf("Sync after the fault: %v, want ErrDeviceLost with CUDA error %s", err, code)
	}
	checks := []struct {
		name string
		err  error
	}{
		{"Health", b.Health()},
		{"GatherRows", b.GatherRows(cols, []int64{0})},
		{"Download", b.Download(make([]byte, 4), ring, 0)},
	}
	for _, c := range checks {
		if !errors.Is(c.err, ErrDeviceLost) {
			t.Errorf("%s after the fault: %v, want ErrDeviceLost", c.name, c.err)
		}
	}
	if _, err := New(); !errors.Is(err, ErrDeviceLost) {
		t.Errorf("New after the fault: %v, want ErrDeviceLost", err)
	}
	if n := b.Launches(); n != 2 {
		t.Errorf("%d launches issued, want 2 (calls after the fault must fail before the driver)", n)
	}
	if err := b.Close(); !errors.Is(err, ErrDeviceLost) {
		t.Errorf("Close after the fault: %v, want ErrDeviceLost", err)
	}
	if err := b.Sync(); !errors.Is(err, ErrClosed) {
		t.Errorf("Sync after Close: %v, want ErrClosed", err)
	}
}

func TestNoDeviceReturnsError(t *testing.T) {
	onStandin(t)
	out, err, parent := child(t, "TestNoDeviceReturnsError", "TRAJRING_STANDIN_NODEVICE=1")
	if parent {
		if err != nil || !strings.Contains(out, "PASS") {
			t.Fatalf("child without a device: %v\n%s", err, out)
		}
		return
	}
	_, err = New()
	if !errors.Is(err, ErrNoDevice) || !strings.Contains(err.Error(), "100") {
		t.Fatalf("New without a device: %v, want ErrNoDevice (CUDA error 100)", err)
	}
}

func TestPrimaryContextOutlivesBackends(t *testing.T) {
	for round := range 3 {
		b, err := New()
		if err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		ring := mustArena(t, b, []byte{1, 2, 3, 4, 5, 6, 7, 8})
		out, _ := b.Alloc(8)
		if err := b.GatherRows([]kernels.Column{{Ring: ring, Out: out, StepBytes: 4}}, []int64{1, 0}); err != nil {
			t.Fatal(err)
		}
		got := make([]byte, 8)
		if err := b.Download(got, out, 0); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, []byte{5, 6, 7, 8, 1, 2, 3, 4}) {
			t.Fatalf("round %d: %v", round, got)
		}
		if err := b.Close(); err != nil {
			t.Fatal(err)
		}
	}
	// A call leaves the calling thread's context as it found it: none.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := cu.SetCurrentContext(cu.CUContext{}); err != nil {
		t.Fatal(err)
	}
	b := newBackend(t)
	if err := b.Sync(); err != nil {
		t.Fatal(err)
	}
	if cur, err := cu.CurrentContext(); err != nil || cur != (cu.CUContext{}) {
		t.Fatalf("context current after a call: %v (%v), want none", cur, err)
	}
	// The primary context is still retained and usable on any thread.
	if err := cu.SetCurrentContext(drv.ctx); err != nil {
		t.Fatal(err)
	}
	if _, _, err := cu.MemInfo(); err != nil {
		t.Fatalf("primary context after closing every backend: %v", err)
	}
}

// TestStreamOrderingWithAConsumer plays a learner on its own stream: it
// waits for the batch's ready event, copies the batch, and records "done";
// the backend waits for "done" before the next gather overwrites the
// batch. Without either wait the stand-in runs the streams in an order
// the device may choose and the consumer reads the wrong batch.
func TestStreamOrderingWithAConsumer(t *testing.T) {
	cases := []struct {
		name                string
		waitReady, waitDone bool
		want                byte // what the consumer reads
	}{
		{"both waits", true, true, 0xA},
		{"consumer does not wait for ready", false, true, 0},  // before the gather
		{"producer does not wait for done", true, false, 0xB}, // after the next gather
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.want != 0xA {
				onStandin(t) // a GPU may happen to run a racy program right
			}
			b := newBackend(t)
			ringData := append(bytes.Repeat([]byte{0xA}, 16), bytes.Repeat([]byte{0xB}, 16)...)
			ring := mustArena(t, b, ringData)
			batch, _ := b.Alloc(16)
			seen, _ := b.Alloc(16)
			ready, err := b.NewEvent()
			if err != nil {
				t.Fatal(err)
			}
			defer ready.Close()
			if err := b.Sync(); err != nil {
				t.Fatal(err)
			}
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			if err := cu.SetCurrentContext(drv.ctx); err != nil {
				t.Fatal(err)
			}
			cs, err := cu.MakeStream(cu.NonBlocking)
			if err != nil {
				t.Fatal(err)
			}
			defer cs.Destroy()
			done, err := cu.MakeEvent(cu.DisableTiming)
			if err != nil {
				t.Fatal(err)
			}
			defer cu.DestroyEvent(&done)
			cols := []kernels.Column{{Ring: ring, Out: batch, StepBytes: 16}}

			if err := b.GatherRows(cols, []int64{0}); err != nil { // batch i: 0xA
				t.Fatal(err)
			}
			if err := b.Record(ready); err != nil {
				t.Fatal(err)
			}
			if c.waitReady {
				if err := cs.Wait(eventOf(ready), 0); err != nil {
					t.Fatal(err)
				}
			}
			if err := cu.MemcpyDtoDAsync(seen.(*Arena).Ptr(), batch.(*Arena).Ptr(), 16, cs); err != nil {
				t.Fatal(err)
			}
			if err := done.Record(cs); err != nil {
				t.Fatal(err)
			}
			if c.waitDone {
				if err := b.WaitHandle(*(*uintptr)(unsafePointer(&done))); err != nil {
					t.Fatal(err)
				}
			}
			if err := b.GatherRows(cols, []int64{1}); err != nil { // batch i+1: 0xB
				t.Fatal(err)
			}
			// The backend's stream first, then the consumer's: a sync runs
			// only its stream's work and what that waits for.
			if err := b.Sync(); err != nil {
				t.Fatal(err)
			}
			if err := cs.Synchronize(); err != nil {
				t.Fatal(err)
			}
			got := make([]byte, 16)
			if err := b.Download(got, seen, 0); err != nil {
				t.Fatal(err)
			}
			if want := bytes.Repeat([]byte{c.want}, 16); !bytes.Equal(got, want) {
				t.Fatalf("consumer saw % x, want % x", got, want)
			}
		})
	}
}

func TestHostIntoPinnedNoAllocs(t *testing.T) {
	b := newBackend(t)
	data := []byte("0123456789abcdef0123456789ABCDEF")
	src := mustArena(t, b, data)
	pin, err := b.AllocPinned(64)
	if err != nil {
		t.Fatal(err)
	}
	ev, err := b.NewEvent()
	if err != nil {
		t.Fatal(err)
	}
	clear(pin)
	if err := b.HostInto(pin[8:24], src, 16); err != nil {
		t.Fatal(err)
	}
	if err := b.Record(ev); err != nil {
		t.Fatal(err)
	}
	if _, standin := StandinDeviceTime(); standin && !bytes.Equal(pin, make([]byte, 64)) {
		// The stand-in runs queued copies only at a sync point: before
		// it, nothing may have been written.
		t.Fatalf("HostInto wrote before its event completed: %q", pin[8:24])
	}
	if err := ev.Synchronize(); err != nil {
		t.Fatal(err)
	}
	if string(pin[8:24]) != "0123456789ABCDEF" {
		t.Fatalf("HostInto: %q", pin[8:24])
	}
	if done, err := ev.Done(); !done || err != nil {
		t.Fatalf("Done: %v %v", done, err)
	}
	if err := b.HostInto(make([]byte, 8), src, 0); !errors.Is(err, ErrBounds) {
		t.Errorf("HostInto into unpinned memory: %v, want ErrBounds", err)
	}
	if err := b.HostInto(pin[:8], src, 28); !errors.Is(err, ErrBounds) {
		t.Errorf("HostInto past the arena: %v, want ErrBounds", err)
	}
	allocs := testing.AllocsPerRun(100, func() {
		if err := b.HostInto(pin[:32], src, 0); err != nil {
			t.Fatal(err)
		}
		if err := b.Record(ev); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Errorf("HostInto+Record: %v allocations per call", allocs)
	}
	if err := ev.Close(); err != nil {
		t.Fatal(err)
	}
	if err := b.FreePinned(pin); err != nil {
		t.Fatal(err)
	}
}
