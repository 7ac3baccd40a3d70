//go:build cgo

package host

import (
	"slices"
	"testing"
	"unsafe"

	"github.com/trajring/trajring/kernels"
)

// The host-only test kernels of testkernels.h (no PTX).
var (
	countPlain  = kernels.Kernel{Entry: "trajring_test_count_plain", Args: 2}
	countAtomic = kernels.Kernel{Entry: "trajring_test_count_atomic", Args: 2}
	chain       = kernels.Kernel{Entry: "trajring_test_chain", Args: 2}
	cover       = kernels.Kernel{Entry: "trajring_test_cover", Args: 2}
	atomics     = kernels.Kernel{Entry: "trajring_test_atomics", Args: 2}
)

// withMode sets m for the rest of the test.
func withMode(t *testing.T, m Mode) {
	prev := SetMode(m)
	t.Cleanup(func() { SetMode(prev) })
}

func u64s(m *Mem) []uint64 {
	return unsafe.Slice((*uint64)(unsafe.Pointer(&m.Bytes()[0])), len(m.Bytes())/8)
}

// TestModeCoversEveryThread checks that every mode runs every simulated
// thread (y, tid) of a grid exactly once, with partial units (blocks that
// are no multiple of the chunk) and more host threads than units.
func TestModeCoversEveryThread(t *testing.T) {
	modes := []Mode{{}, {Threads: 1, Seed: 3}, {Threads: 4, Chunk: 1, Seed: 5}, {Threads: 3, Chunk: 7, Seed: 9},
		{Threads: 64, Chunk: 1000}, {Threads: 2, Chunk: 32}}
	for _, m := range modes {
		withMode(t, m)
		for _, g := range [][3]int64{{1, 1, 1}, {3, 2, 100}, {5, 3, 32}, {2, 1, 256}, {1, 4, 7}} {
			nt := g[0] * g[2]
			hits := newEnv(t, 1).mem(int(4 * (nt*g[1] + 16)))
			clear(hits.Bytes())
			if err := Launch(cover, g[0], g[1], g[2], hits.Addr(0), 0); err != nil {
				t.Fatal(err)
			}
			h := unsafe.Slice((*uint32)(unsafe.Pointer(&hits.Bytes()[0])), nt*g[1]+16)
			for i, v := range h {
				want := uint32(1)
				if int64(i) >= nt*g[1] {
					want = 0 // past the grid: untouched
				}
				if v != want {
					t.Fatalf("mode %+v grid %v: thread %d ran %d times, want %d", m, g, i, v, want)
				}
			}
		}
	}
}

// TestRaceExposureLosesPlainIncrements is the proof that the mode exposes
// races: a kernel whose threads increment one counter with plain loads and
// stores counts every increment in order and on one host thread, but loses
// some on four (each launch runs 2^20 increments; a loss is all but
// certain within a few launches, even when the host threads share one
// core, since a preemption between a load and its store loses whatever
// the other threads added meanwhile). The same kernel with
// tr_atomic_add_u64 never loses one.
func TestRaceExposureLosesPlainIncrements(t *testing.T) {
	const gx, bx, iters = 8, 256, 512
	const want = gx * bx * iters
	e := newEnv(t, 1)
	ctr := e.mem(8)
	count := func(k kernels.Kernel) uint64 {
		t.Helper()
		u64s(ctr)[0] = 0
		if err := Launch(k, gx, 1, bx, ctr.Addr(0), iters); err != nil {
			t.Fatal(err)
		}
		return u64s(ctr)[0]
	}
	for _, m := range []Mode{{}, {Threads: 1, Seed: 2}} {
		withMode(t, m)
		if got := count(countPlain); got != want {
			t.Fatalf("mode %+v: plain count %d, want %d (one host thread cannot race)", m, got, want)
		}
	}
	withMode(t, Mode{Threads: 4, Seed: 1})
	lost := false
	// Up to 200 launches (a few ms each): on a machine whose other cores
	// are busy the threads can run one after another through a launch;
	// one of 20 tries (20 launches) failed that way once under load.
	for try := 0; try < 200 && !lost; try++ {
		got := count(countPlain)
		if got > want {
			t.Fatalf("plain count %d > %d", got, want)
		}
		lost = got < want
		t.Logf("try %d: plain count %d of %d", try, got, want)
	}
	if !lost {
		t.Fatal("race exposure: 200 launches of a racy counter lost no increment")
	}
	for try := 0; try < 5; try++ {
		if got := count(countAtomic); got != want {
			t.Fatalf("atomic count %d, want %d", got, want)
		}
	}
}

// TestAtomicHelpers checks the tr_atomic_* helpers of kernels.h in the
// host build: every thread of a launch uses each on shared words, and the
// invariants that hold only for atomic operations (see trajring_test_atomics
// in testkernels.h) hold in order and in race exposure.
func TestAtomicHelpers(t *testing.T) {
	const gx, bx = 8, 256
	const nt = gx * bx
	w := newEnv(t, 1).mem(8 * 11)
	for _, m := range []Mode{{}, {Threads: 4, Chunk: 1, Seed: 3}, {Threads: 4, Seed: 4}} {
		withMode(t, m)
		for try := 0; try < 5; try++ {
			clear(w.Bytes())
			if err := Launch(atomics, gx, 2, bx, w.Addr(0), 0); err != nil {
				t.Fatal(err)
			}
			v := u64s(w)
			lo := func(x uint64) uint64 { return x & 0xFFFFFFFF }
			hi := func(x uint64) uint64 { return x >> 32 }
			switch {
			case v[0] != nt || lo(v[1]) != nt || hi(v[1]) != 0:
				t.Fatalf("mode %+v: max %d, max32 %#x, want %d", m, v[0], v[1], nt)
			case v[3] != 1 || v[2] < 1 || v[2] > nt || v[5] != 1 || lo(v[4]) < 1 || lo(v[4]) > nt || hi(v[4]) != 0:
				t.Fatalf("mode %+v: CAS winners %d (%d) and %d (%#x), want one each", m, v[3], v[2], v[5], v[4])
			case v[7]+v[6] != nt*(nt+1)/2 || v[9]+lo(v[8]) != nt*(nt+1)/2 || hi(v[8]) != 0:
				t.Fatalf("mode %+v: exchanged %d+%d and %d+%#x, want %d", m, v[7], v[6], v[9], v[8], nt*(nt+1)/2)
			case v[10] != 0:
				t.Fatalf("mode %+v: %d loads saw less than the loader's own max", m, v[10])
			}
		}
	}
}

// TestRaceExposureShowsOrderDependence: a kernel in which each thread reads
// the value the previous thread wrote in the same launch is right in order,
// wrong once units are shuffled, and wrong the same way again for the same
// seed (so a failure found with Threads 1 is reproducible).
func TestRaceExposureShowsOrderDependence(t *testing.T) {
	const gx, bx, n = 16, 256, 4000
	e := newEnv(t, 1)
	out := e.mem(8 * n)
	run := func() []uint64 {
		t.Helper()
		clear(out.Bytes())
		if err := Launch(chain, gx, 1, bx, out.Addr(0), n); err != nil {
			t.Fatal(err)
		}
		return slices.Clone(u64s(out))
	}
	want := make([]uint64, n)
	for i := range want {
		want[i] = uint64(i + 1)
	}
	withMode(t, Mode{})
	if got := run(); !slices.Equal(got, want) {
		t.Fatalf("in order: chain %v..., want 1, 2, ...", got[:8])
	}
	withMode(t, Mode{Threads: 1, Seed: 7})
	first := run()
	if slices.Equal(first, want) {
		t.Fatal("shuffled on one thread: chain right, want the order dependence exposed")
	}
	SetMode(Mode{Threads: 1, Seed: 7}) // restarts the launch count: same order
	if again := run(); !slices.Equal(again, first) {
		t.Fatal("shuffled on one thread: same seed, different result")
	}
	withMode(t, Mode{Threads: 4, Seed: 7})
	if got := run(); slices.Equal(got, want) {
		t.Fatal("four threads: chain right, want the order dependence exposed")
	}
}

// TestSetMode checks SetMode's clamping and that it returns the previous
// mode.
func TestSetMode(t *testing.T) {
	prev := SetMode(Mode{Threads: 3, Chunk: 5, Seed: 11})
	t.Cleanup(func() { SetMode(prev) })
	for _, tc := range []struct{ set, want Mode }{
		{Mode{Threads: -1, Chunk: 0, Seed: 4}, Mode{Threads: 0, Chunk: 32, Seed: 4}},
		{Mode{Threads: 1000, Chunk: -7}, Mode{Threads: 64, Chunk: 32}},
		{Mode{Threads: 2, Chunk: 1, Seed: 1 << 63}, Mode{Threads: 2, Chunk: 1, Seed: 1 << 63}},
	} {
		before := CurrentMode()
		if got := SetMode(tc.set); got != before {
			t.Fatalf("SetMode(%+v) returned %+v, want the previous %+v", tc.set, got, before)
		}
		if got := CurrentMode(); got != tc.want {
			t.Fatalf("SetMode(%+v): mode %+v, want %+v", tc.set, got, tc.want)
		}
	}
}

// TestKernelsUnderRaceExposure runs every kernel's check against the cpu
// reference again in race exposure, one simulated thread per unit on four
// host threads: kernels whose threads share no memory must give the same
// bytes in any order. It is skipped when the whole package already runs
// in race exposure (TRAJRING_STANDIN_THREADS set, as in make test-cuda's
// second pass) and under -short.
func TestKernelsUnderRaceExposure(t *testing.T) {
	if m := CurrentMode(); m.Threads > 0 {
		t.Skipf("every test already runs in race exposure (%+v)", m)
	}
	if testing.Short() {
		t.Skip("-short")
	}
	withMode(t, Mode{Threads: 4, Chunk: 1, Seed: 42})
	for _, tc := range []struct {
		name string
		f    func(*testing.T)
	}{
		{"GatherRows", TestGatherRowsMatchesCPU},
		{"Concat", TestConcatMatchesCPU},
		{"Scatter", TestScatterMatchesCPU},
		{"ScatterSkipsNegative", TestScatterSkipsNegative},
		{"GatherWindows", TestGatherWindowsMatchesCPU},
		{"GatherWindowsExact", TestGatherWindowsExact},
		{"NStepReward", TestNStepRewardMatchesCPU},
		{"NStepRewardExact", TestNStepRewardExact},
		{"Strided", TestStridedMatchesCPU},
		{"StridedNStepReward", TestStridedNStepRewardMatchesCPU},
	} {
		t.Run(tc.name, tc.f)
	}
}
