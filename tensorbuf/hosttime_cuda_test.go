//go:build cuda

package tensorbuf_test

import (
	"context"
	"fmt"
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
// slices), next to the cpu backend's Add of the same step from the host.
func TestHostTime(t *testing.T) {
	if os.Getenv("TRAJRING_HOSTTIME") == "" {
		t.Skip("set TRAJRING_HOSTTIME=1 to measure host time")
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	const B, calls = 256, 400
	var sb strings.Builder
	fmt.Fprintf(&sb, "%-30s %-8s %12s %12s %8s\n", "call (B=256)", "rows", "gpu host CPU µs", "cpu CPU µs", "ratio")
	for _, kind := range []string{"low-dim", "3KB"} {
		type timing struct{ gpu, cpu time.Duration }
		res := map[string]*timing{}
		order := []string{"Table.SampleInto L=1", "SampleTransitionsInto", "Writer.Add W=256", "Writer.Add W=256 device source"}
		for _, o := range order {
			res[o] = &timing{}
		}
		for _, backend := range []string{"gpu", "cpu"} {
			var be tensorbuf.Backend
			if backend == "gpu" {
				g, err := gpu.New()
				if err != nil {
					t.Fatal(err)
				}
				be = g
			} else {
				be = cpu.New()
			}
			buf, err := tensorbuf.New(tensorbuf.Config{NumEnvs: B, Capacity: 64, Fields: hostTimeFields[kind], Seed: 1, Backend: be})
			if err != nil {
				t.Fatal(err)
			}
			w, err := buf.NewWriter()
			if err != nil {
				t.Fatal(err)
			}
			step := fullStep(hostTimeFields[kind], B)
			for range 40 {
				if err := w.Add(step); err != nil {
					t.Fatal(err)
				}
			}
			tbl, err := buf.NewTable(tensorbuf.TableConfig{Name: "t"})
			if err != nil {
				t.Fatal(err)
			}
			for r := range B {
				for s := range int64(32) {
					if _, err := tbl.Insert(tensorbuf.Item{Row: r, Start: 8 + s, Len: 1, Priority: 1}); err != nil {
						t.Fatal(err)
					}
				}
			}
			ctx := context.Background()
			bt, tr := new(tensorbuf.Batch), new(tensorbuf.Transitions)
			devStep := deviceStep(t, be, hostTimeFields[kind], step)
			ops := map[string]func() error{
				"Table.SampleInto L=1":           func() error { return tbl.SampleInto(ctx, bt, B) },
				"SampleTransitionsInto":          func() error { return buf.SampleTransitionsInto(tr, B) },
				"Writer.Add W=256":               func() error { return w.Add(step) },
				"Writer.Add W=256 device source": func() error { return w.Add(devStep) },
			}
			for _, name := range order {
				f := ops[name]
				for range calls { // warm up (see TestDeviceSelectionHostTime)
					if err := f(); err != nil {
						t.Fatal(err)
					}
				}
				if err := be.Sync(); err != nil {
					t.Fatal(err)
				}
				// Thread CPU time, not wall time: the machine is shared, and
				// the calls run on this (locked) thread.
				dev0, _ := gpu.StandinDeviceTime()
				cpu0 := threadCPU(t)
				for range calls {
					if err := f(); err != nil {
						t.Fatal(err)
					}
				}
				used := threadCPU(t) - cpu0
				dev1, _ := gpu.StandinDeviceTime()
				if backend == "gpu" {
					res[name].gpu = (used - (dev1 - dev0)) / calls
				} else {
					res[name].cpu = used / calls
				}
				if err := be.Sync(); err != nil {
					t.Fatal(err)
				}
			}
			_ = bt.Release()
			_ = tr.Release()
			_ = buf.Close()
			if backend == "gpu" {
				_ = be.Close()
			}
		}
		for _, name := range order {
			r := res[name]
			fmt.Fprintf(&sb, "%-30s %-8s %12.1f %12.1f %7.2fx\n", name, kind,
				float64(r.gpu.Nanoseconds())/1e3, float64(r.cpu.Nanoseconds())/1e3, float64(r.gpu)/float64(r.cpu))
		}
	}
	t.Log("\n" + sb.String())
	if out := os.Getenv("TRAJRING_HOSTTIME_OUT"); out != "" {
		if err := os.WriteFile(out, []byte(sb.String()), 0o644); err != nil {
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
