//go:build trajring_cuda

package gpu

import (
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/trajring/trajring/kernels"
	"gorgonia.org/cu"
)

// TestStartupTime logs how long New takes in this process: the first
// (primary context and kernel load, cold) and a later one (warm: the
// context and modules are retained). bench/gpu-check.sh reports the line.
func TestStartupTime(t *testing.T) {
	t0 := time.Now()
	b, err := New()
	if err != nil {
		t.Fatal(err)
	}
	first := time.Since(t0)
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	t1 := time.Now()
	b, err = New()
	if err != nil {
		t.Fatal(err)
	}
	warm := time.Since(t1)
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	t.Logf("startup: first_new_ms=%.3f warm_new_ms=%.3f (first is cold only when this test runs first in its process)",
		float64(first.Microseconds())/1e3, float64(warm.Microseconds())/1e3)
}

// TestStickyFaultProbe makes a real kernel read an unmapped device
// address (a forged arena over a reserved range with no memory behind it,
// reserveUnmapped) and checks that the sticky fault is reported as
// ErrDeviceLost by the next call and by Health, and that every later call
// fails fast. It needs a GPU (on the stand-in the host build of the kernel
// would fault the process; TestStickyFaultIsReportedAndFailsFast injects
// one there instead): run with TRAJRING_GPU_FAULT_PROBE=1.
func TestStickyFaultProbe(t *testing.T) {
	if os.Getenv("TRAJRING_GPU_FAULT_PROBE") == "" {
		t.Skip("set TRAJRING_GPU_FAULT_PROBE=1 on a GPU")
	}
	if _, standin := StandinDeviceTime(); standin {
		t.Skip("the stand-in runs kernels on the host: an illegal address would kill the process")
	}
	out, err, parent := child(t, "TestStickyFaultProbe")
	if parent {
		if err != nil {
			t.Fatalf("child: %v\n%s", err, out)
		}
		t.Logf("probe child output:\n%s", out)
		return
	}
	b, err := New()
	if err != nil {
		t.Fatal(err)
	}
	ring := mustArena(t, b, make([]byte, 64))
	b.mu.Lock()
	err = b.bindNow()
	var p cu.DevicePtr
	if err == nil {
		p, err = reserveUnmapped()
	}
	b.exit() // unbinds and unlocks
	if err != nil {
		t.Fatal(err)
	}
	b.mu.Lock()
	bad := &Arena{ptr: p, size: 1 << 20, owner: b} // unmapped
	b.arenas[bad] = struct{}{}
	b.mu.Unlock()
	t0 := time.Now()
	if err := b.GatherRows([]kernels.Column{{Ring: bad, Out: ring, StepBytes: 16}}, []int64{5}); err != nil {
		t.Fatalf("launch: %v", err)
	}
	err = b.Sync()
	t.Logf("fault seen after %v: %v", time.Since(t0), err)
	if !errors.Is(err, ErrDeviceLost) {
		t.Fatalf("Sync after an illegal address: %v, want ErrDeviceLost", err)
	}
	if err := b.Health(); !errors.Is(err, ErrDeviceLost) {
		t.Fatalf("Health: %v", err)
	}
	t1 := time.Now()
	err = b.GatherRows([]kernels.Column{{Ring: ring, Out: ring, StepBytes: 16}}, []int64{0})
	if !errors.Is(err, ErrDeviceLost) || !strings.Contains(err.Error(), "CUDA error") {
		t.Fatalf("call after the fault: %v", err)
	}
	t.Logf("sticky-fault probe: PASS (fail-fast call took %v)", time.Since(t1))
}

// TestReserveUnmapped: the probe's range is reserved address space that
// no allocation overlaps, and two reservations do not overlap either.
func TestReserveUnmapped(t *testing.T) {
	b := newBackend(t)
	a, err := b.Alloc(1 << 20)
	if err != nil {
		t.Fatal(err)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.bindNow(); err != nil {
		t.Fatal(err)
	}
	defer func() { unbind(b.restore); b.restore, b.bound = ctxHandle{}, false }()
	p, err := reserveUnmapped()
	if err != nil {
		t.Fatal(err)
	}
	q, err := reserveUnmapped()
	if err != nil {
		t.Fatal(err)
	}
	ap := a.(*Arena).ptr
	for _, r := range []struct {
		name   string
		lo, hi cu.DevicePtr
	}{{"second range", q, q + reservedBytes}, {"arena", ap, ap + 1<<20}} {
		if p == 0 || r.lo < p+reservedBytes && p < r.hi {
			t.Errorf("reserved [%#x, %#x) overlaps the %s [%#x, %#x)", p, p+reservedBytes, r.name, r.lo, r.hi)
		}
	}
	for _, r := range []cu.DevicePtr{p, q} {
		if err := freeReserved(r); err != nil {
			t.Fatal(err)
		}
	}
	if err := freeReserved(p); !errors.Is(err, ErrDriver) {
		t.Errorf("second free of a range: %v, want ErrDriver", err)
	}
}
