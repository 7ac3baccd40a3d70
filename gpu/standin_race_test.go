//go:build trajring_cuda

package gpu

import (
	"testing"
	"unsafe"

	"gorgonia.org/cu"
)

// racePTX declares the host-only test kernels of kernels/host/testkernels.h
// so that the stand-in's cuModuleGetFunction finds them (it checks entries
// and 8-byte parameters against the PTX). On a GPU they would be empty, so
// the test needs the stand-in.
const racePTX = `.version 7.0
.target sm_80
.address_size 64

.visible .entry trajring_test_count_plain(.param .u64 p0, .param .u64 p1) { ret; }
.visible .entry trajring_test_count_atomic(.param .u64 p0, .param .u64 p1) { ret; }
.visible .entry trajring_test_chain(.param .u64 p0, .param .u64 p1) { ret; }
`

// raceKernels launches the stand-in's test kernels through the driver API,
// as the backend launches its own: queued on the NULL stream and run at the
// next synchronisation, in the stand-in's mode at that time.
type raceKernels struct {
	t   *testing.T
	fns map[string]cu.Function
	mem cu.DevicePtr
	n   int64
}

func newRaceKernels(t *testing.T, bytes int64) *raceKernels {
	t.Helper()
	if _, ok := StandinDeviceTime(); !ok {
		t.Skip("needs the stand-in driver (gpu/standin)")
	}
	newBackend(t) // initialises the driver
	prev, err := bind()
	if err != nil {
		t.Fatal(err)
	}
	defer unbind(prev)
	m, err := cu.LoadData(racePTX)
	if err != nil {
		t.Fatalf("cuModuleLoadData: %v", err)
	}
	k := &raceKernels{t: t, fns: map[string]cu.Function{}, n: bytes}
	for _, name := range []string{"trajring_test_count_plain", "trajring_test_count_atomic", "trajring_test_chain"} {
		if k.fns[name], err = m.Function(name); err != nil {
			t.Fatalf("cuModuleGetFunction(%s): %v", name, err)
		}
	}
	if k.mem, err = cu.MemAlloc(bytes); err != nil {
		t.Fatalf("cuMemAlloc: %v", err)
	}
	t.Cleanup(func() {
		prev, err := bind()
		if err != nil {
			t.Error(err)
			return
		}
		defer unbind(prev)
		if err := cu.MemFree(k.mem); err != nil {
			t.Errorf("cuMemFree: %v", err)
		}
	})
	return k
}

// run zeroes the memory, launches kernel name on gx blocks of bx threads
// with arguments (memory, arg) and returns the memory as uint64s.
func (k *raceKernels) run(name string, gx, bx int, arg uint64) []uint64 {
	k.t.Helper()
	prev, err := bind()
	if err != nil {
		k.t.Fatal(err)
	}
	defer unbind(prev)
	if err := cu.MemsetD8(k.mem, 0, k.n); err != nil {
		k.t.Fatalf("cuMemsetD8: %v", err)
	}
	args := [2]uint64{uint64(k.mem), arg}
	params := []unsafe.Pointer{unsafe.Pointer(&args[0]), unsafe.Pointer(&args[1])}
	if err := k.fns[name].Launch(gx, 1, 1, bx, 1, 1, 0, cu.NoStream, params); err != nil {
		k.t.Fatalf("cuLaunchKernel(%s): %v", name, err)
	}
	out := make([]uint64, k.n/8)
	if err := cu.MemcpyDtoH(unsafe.Pointer(&out[0]), k.mem, k.n); err != nil { // runs the launch
		k.t.Fatalf("cuMemcpyDtoH: %v", err)
	}
	return out
}

func withStandinMode(t *testing.T, m StandinMode) {
	t.Helper()
	prev, ok := SetStandinMode(m)
	if !ok {
		if _, standin := StandinDeviceTime(); standin {
			t.Fatal("the stand-in driver has no trajring_standin_set_mode: rebuild it (make standin)")
		}
		t.Skip("needs the stand-in driver (gpu/standin)")
	}
	t.Cleanup(func() { SetStandinMode(prev) })
}

// inStandinMode sets the stand-in's mode as withStandinMode does, and on a
// real driver does nothing: for tests whose assertions hold on a GPU too
// (the GPU interleaves threads itself), which must run there rather than
// skip.
func inStandinMode(t *testing.T, m StandinMode) {
	t.Helper()
	if _, standin := StandinDeviceTime(); !standin {
		if _, ok := CurrentStandinMode(); !ok {
			return
		}
	}
	withStandinMode(t, m)
}

// TestStandinRaceExposure is the proof, through cuLaunchKernel, that the
// stand-in's race exposure shows races: a kernel whose threads increment
// one counter with plain loads and stores counts all 2^20 increments in
// order but loses some on four host threads (within a few launches; see
// TestRaceExposureLosesPlainIncrements in kernels/host), its atomic twin
// never loses one, and a kernel in which each thread reads its
// predecessor's write is right only in order.
func TestStandinRaceExposure(t *testing.T) {
	const gx, bx, iters = 8, 256, 512
	const want = gx * bx * iters
	k := newRaceKernels(t, 8*4096)
	withStandinMode(t, StandinMode{})
	if got := k.run("trajring_test_count_plain", gx, bx, iters)[0]; got != want {
		t.Fatalf("in order: plain count %d, want %d", got, want)
	}
	withStandinMode(t, StandinMode{Threads: 4, Seed: 1})
	lost := false
	// Up to 200 launches: on a machine whose other cores are busy the
	// host threads can run one after another through a launch (20 tries
	// lost nothing once under load), as in kernels/host's twin test.
	for try := 0; try < 200 && !lost; try++ {
		got := k.run("trajring_test_count_plain", gx, bx, iters)[0]
		if got > want {
			t.Fatalf("plain count %d > %d", got, want)
		}
		lost = got < want
	}
	if !lost {
		t.Fatal("race exposure: 200 launches of a racy counter lost no increment")
	}
	for try := 0; try < 5; try++ {
		if got := k.run("trajring_test_count_atomic", gx, bx, iters)[0]; got != want {
			t.Fatalf("atomic count %d, want %d", got, want)
		}
	}
	chainRight := func(v []uint64) bool {
		for i, x := range v {
			if x != uint64(i+1) {
				return false
			}
		}
		return true
	}
	if chainRight(k.run("trajring_test_chain", 16, 256, 4096)) {
		t.Fatal("race exposure: chain right, want the order dependence exposed")
	}
	withStandinMode(t, StandinMode{})
	if !chainRight(k.run("trajring_test_chain", 16, 256, 4096)) {
		t.Fatal("in order: chain wrong")
	}
}

// TestSetStandinMode checks that the hook reaches the stand-in: it returns
// the previous mode and clamps out-of-range values.
func TestSetStandinMode(t *testing.T) {
	withStandinMode(t, StandinMode{Threads: 2, Chunk: 8, Seed: 3})
	for _, tc := range []struct{ set, want StandinMode }{
		{StandinMode{Threads: 5, Chunk: 0, Seed: 9}, StandinMode{Threads: 5, Chunk: 32, Seed: 9}},
		{StandinMode{Threads: 99, Chunk: 1}, StandinMode{Threads: 64, Chunk: 1}},
		{StandinMode{Threads: -2, Chunk: -1, Seed: 1}, StandinMode{Threads: 0, Chunk: 32, Seed: 1}},
	} {
		before, _ := CurrentStandinMode()
		if got, _ := SetStandinMode(tc.set); got != before {
			t.Fatalf("SetStandinMode(%+v) returned %+v, want the previous %+v", tc.set, got, before)
		}
		if got, _ := CurrentStandinMode(); got != tc.want {
			t.Fatalf("SetStandinMode(%+v): mode %+v, want %+v", tc.set, got, tc.want)
		}
	}
}
