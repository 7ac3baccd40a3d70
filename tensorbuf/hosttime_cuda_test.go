//go:build trajring_cuda

package tensorbuf_test

import (
	"context"
	"fmt"
	"math"
	"os"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/trajring/trajring/cpu"
	"github.com/trajring/trajring/gpu"
	"github.com/trajring/trajring/tensorbuf"
	"gorgonia.org/tensor"
)

// TestHostTime measures the host time of Table.SampleInto,
// SampleTransitionsInto and Writer.Add at B=256 on the gpu backend (the
// time until the call returns, device work still queued: on the
// stand-in, wall time minus the time it spends running that work) next
// to the cpu backend's time for the same call, in the same run. Set
// TRAJRING_HOSTTIME=1 to run it; TRAJRING_HOSTTIME_OUT=file also writes
// the table there. Times are the calling thread's CPU time per call
// (CLOCK_THREAD_CPUTIME_ID), less the stand-in's device time, so other processes
// on the machine do not inflate them. "Writer.Add W=256 device source"
// adds a step whose fields are device tensors of the gpu backend (a
// GPU-resident environment's step; the built-in columns stay host
// slices), next to the cpu backend's Add of the same step from the host;
// "AllocSource source" adds it from host memory of gpu.AllocSource,
// which the device reads by DMA (an environment that writes its steps
// there). The best of interleaved rounds is kept (bestHostTimes).
func TestHostTime(t *testing.T) {
	if os.Getenv("TRAJRING_HOSTTIME") == "" {
		t.Skip("set TRAJRING_HOSTTIME=1 to measure host time")
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	const B, calls, rounds = 256, 800, 8
	var sb strings.Builder
	fmt.Fprintf(&sb, "%-38s %-8s %12s %12s %8s\n", "call (B=256)", "rows", "gpu host CPU µs", "cpu CPU µs", "ratio")
	order := []string{"Table.SampleInto L=1", "Table.SampleInto L=1 device selection", "SampleTransitionsInto",
		"Writer.Add W=256", "Writer.Add W=256 AllocSource source", "Writer.Add W=256 device source"}
	for _, kind := range []string{"low-dim", "3KB"} {
		setups := []*addSampleSetup{newAddSampleSetup(t, true, kind, B), newAddSampleSetup(t, false, kind, B)}
		for _, name := range order {
			runs := make([]hostRun, len(setups))
			for i, su := range setups {
				runs[i] = hostRun{be: su.be, run: func(k int) { su.run(t, name, k) }}
			}
			best := bestHostTimes(t, runs, calls, rounds)
			fmt.Fprintf(&sb, "%-38s %-8s %12.2f %12.1f %7.3fx\n", name, kind,
				float64(best[0].Nanoseconds())/1e3, float64(best[1].Nanoseconds())/1e3, float64(best[0])/float64(best[1]))
		}
		for _, su := range setups {
			su.close()
		}
	}
	t.Log("\n" + sb.String())
	if out := os.Getenv("TRAJRING_HOSTTIME_OUT"); out != "" {
		if err := os.WriteFile(out, []byte(sb.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// addSampleSetup is one backend of TestHostTime: B rows of 64 steps, a
// host-selected and a device-selected uniform table (the latter only on
// the gpu backend; on the cpu backend both are host-selected) of 32
// one-step items per row, and the step added in the Add rows.
type addSampleSetup struct {
	be            tensorbuf.Backend
	g             *gpu.Backend
	buf           *tensorbuf.Buffer
	w             *tensorbuf.Writer
	tbl, devTbl   *tensorbuf.Table
	bt, devBt     *tensorbuf.Batch
	tr            *tensorbuf.Transitions
	step, devStep *tensorbuf.Step
	srcStep       *tensorbuf.Step // fields in AllocSource memory (gpu)
}

func newAddSampleSetup(t *testing.T, onGPU bool, kind string, B int) *addSampleSetup {
	t.Helper()
	su := &addSampleSetup{bt: new(tensorbuf.Batch), devBt: new(tensorbuf.Batch), tr: new(tensorbuf.Transitions)}
	if onGPU {
		g, err := gpu.New()
		if err != nil {
			t.Fatal(err)
		}
		su.be, su.g = g, g
	} else {
		su.be = cpu.New()
	}
	var err error
	if su.buf, err = tensorbuf.New(tensorbuf.Config{NumEnvs: B, Capacity: 64, Fields: hostTimeFields[kind], Seed: 1, Backend: su.be}); err != nil {
		t.Fatal(err)
	}
	if su.w, err = su.buf.NewWriter(); err != nil {
		t.Fatal(err)
	}
	su.step = fullStep(hostTimeFields[kind], B)
	for range 40 {
		if err := su.w.Add(su.step); err != nil {
			t.Fatal(err)
		}
	}
	su.devStep = deviceStep(t, su.be, hostTimeFields[kind], su.step)
	su.srcStep = allocSourceStep(t, su.be, su.step)
	for i, tb := range []**tensorbuf.Table{&su.tbl, &su.devTbl} {
		if *tb, err = su.buf.NewTable(tensorbuf.TableConfig{Name: fmt.Sprint("t", i), DeviceSelection: i == 1 && onGPU}); err != nil {
			t.Fatal(err)
		}
		for r := range B {
			for s := range int64(32) {
				if _, err := (*tb).Insert(tensorbuf.Item{Row: r, Start: 8 + s, Len: 1, Priority: 1}); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	return su
}

// run makes the call name k times.
func (su *addSampleSetup) run(t *testing.T, name string, k int) {
	ctx, B := context.Background(), su.buf.NumEnvs()
	var f func() error
	switch name {
	case "Table.SampleInto L=1":
		f = func() error { return su.tbl.SampleInto(ctx, su.bt, B) }
	case "Table.SampleInto L=1 device selection":
		f = func() error { return su.devTbl.SampleInto(ctx, su.devBt, B) }
	case "SampleTransitionsInto":
		f = func() error { return su.buf.SampleTransitionsInto(su.tr, B) }
	case "Writer.Add W=256":
		f = func() error { return su.w.Add(su.step) }
	case "Writer.Add W=256 AllocSource source":
		f = func() error { return su.w.Add(su.srcStep) }
	case "Writer.Add W=256 device source":
		f = func() error { return su.w.Add(su.devStep) }
	default:
		t.Fatalf("unknown call %q", name)
	}
	for range k {
		if err := f(); err != nil {
			t.Fatal(err)
		}
	}
}

func (su *addSampleSetup) close() {
	_ = su.be.Sync()
	_ = su.bt.Release()
	_ = su.devBt.Release()
	_ = su.tr.Release()
	_ = su.buf.Close()
	if su.g != nil {
		_ = su.g.Close()
	}
}

// hostRun is one contender of bestHostTimes: run makes k calls on be.
type hostRun struct {
	be  tensorbuf.Backend
	run func(k int)
}

// bestHostTimes times the host CPU time per call of each run, interleaved
// in rounds of calls/rounds calls, and returns the best round of each: a
// round that the machine's other work (or a sibling hyperthread) slowed
// is not the call's cost, and every run sees the same machine. Each run
// first makes as many calls as are timed, so the stand-in's queue holds
// them without growing (a driver's command buffer does not grow either).
// A gpu backend's time is its thread CPU time less the stand-in's device
// time; every backend is synchronised after its round. The caller has
// locked its OS thread.
func bestHostTimes(t *testing.T, runs []hostRun, calls, rounds int) []time.Duration {
	t.Helper()
	for _, r := range runs {
		r.run(calls)
	}
	best := make([]time.Duration, len(runs))
	for i := range best {
		best[i] = time.Duration(math.MaxInt64)
	}
	per := calls / rounds
	for range rounds {
		for i, r := range runs {
			dev0, _ := gpu.StandinDeviceTime()
			cpu0 := threadCPU(t)
			r.run(per)
			used := threadCPU(t) - cpu0
			dev1, _ := gpu.StandinDeviceTime()
			if _, ok := r.be.(*gpu.Backend); ok {
				used -= dev1 - dev0
			}
			best[i] = min(best[i], used/time.Duration(per))
			if err := r.be.Sync(); err != nil {
				t.Fatal(err)
			}
		}
	}
	return best
}

// hostTimeRow times runs (device selection, host selection, cpu, in
// that order) with bestHostTimes and formats one row of a host-time
// table with format: name, each run's µs per call, the first over the
// third, and g's launches per call (warm-up and timed calls).
func hostTimeRow(t *testing.T, g *gpu.Backend, runs []hostRun, calls, rounds int, format, name string) string {
	t.Helper()
	l0 := g.Launches()
	best := bestHostTimes(t, runs, calls, rounds)
	launched := g.Launches() - l0
	us := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e3 }
	return fmt.Sprintf(format, name, us(best[0]), us(best[1]), us(best[2]),
		float64(best[0])/float64(best[2]), float64(launched)/(2*float64(calls)))
}

// reportHostTimes logs a host-time table and writes it to
// $TRAJRING_HOSTTIME_OUT when that is set.
func reportHostTimes(t *testing.T, table string) {
	t.Helper()
	t.Log("\n" + table)
	if out := os.Getenv("TRAJRING_HOSTTIME_OUT"); out != "" {
		if err := os.WriteFile(out, []byte(table), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// threadCPU returns the CPU time of the calling thread, to the
// nanosecond (clock_gettime(CLOCK_THREAD_CPUTIME_ID); getrusage's
// RUSAGE_THREAD moves in scheduler ticks of milliseconds here, as coarse
// as a whole row's 400 calls).
func threadCPU(t testing.TB) time.Duration {
	var ts syscall.Timespec
	const clockThreadCPUTimeID = 3
	if _, _, e := syscall.RawSyscall(syscall.SYS_CLOCK_GETTIME, clockThreadCPUTimeID, uintptr(unsafe.Pointer(&ts)), 0); e != 0 {
		t.Fatal(e)
	}
	return time.Duration(ts.Nano())
}

// allocSourceStep returns step with its fields copied into memory from
// the gpu backend's AllocSource (freed with the backend), and step itself
// on another backend.
func allocSourceStep(t testing.TB, be tensorbuf.Backend, step *tensorbuf.Step) *tensorbuf.Step {
	t.Helper()
	g, ok := be.(*gpu.Backend)
	if !ok {
		return step
	}
	ps := *step
	ps.Values = map[string]*tensor.Dense{}
	for name, d := range step.Values {
		m, err := g.AllocSource(int64(len(d.Header.Raw)))
		if err != nil {
			t.Fatal(err)
		}
		copy(m, d.Header.Raw)
		ps.Values[name] = tensor.New(tensor.Of(d.Dtype()), tensor.WithShape(d.Shape().Clone()...),
			tensor.FromMemory(uintptr(unsafe.Pointer(&m[0])), uintptr(len(m))))
	}
	return &ps
}

// deviceStep returns step with its fields as device tensors of be when be
// is a gpu backend (zeroed arenas of be, freed with the backend), and
// step itself otherwise: the cpu backend's own memory is host memory.
func deviceStep(t testing.TB, be tensorbuf.Backend, fields []tensorbuf.Field, step *tensorbuf.Step) *tensorbuf.Step {
	t.Helper()
	g, ok := be.(*gpu.Backend)
	if !ok {
		return step
	}
	ds := *step
	ds.Values = map[string]*tensor.Dense{}
	for _, f := range fields {
		shape := step.Values[f.Name].Shape().Clone()
		a, err := g.Alloc(int64(step.Values[f.Name].MemSize()))
		if err != nil {
			t.Fatal(err)
		}
		if ds.Values[f.Name], err = g.Tensor(a, 0, f.DType.Tensor(), shape...); err != nil {
			t.Fatal(err)
		}
	}
	return &ds
}
