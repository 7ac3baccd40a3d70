//go:build trajring_cuda

package tensorbuf_test

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/trajring/trajring/cpu"
	"github.com/trajring/trajring/gpu"
	"github.com/trajring/trajring/tensorbuf"
	"gorgonia.org/tensor"
)

// TestDeviceSelectionHostTime measures the host time of a uniform and a
// prioritized (Beta 0.4) Table.SampleInto at B=256 on the gpu backend with DeviceSelection (draw
// and gather queued, nothing waited for), and with host selection, next to
// the cpu backend's whole sample of the same table (same rows, items and
// seed), in the same run. Times are the calling thread's CPU time per
// call (the best of 16 interleaved rounds of 250 calls per mode;
// CLOCK_THREAD_CPUTIME_ID, the clock the stand-in times its device
// work with: getrusage's thread times are too coarse for calls of a
// microsecond) less the stand-in's device time (see TestHostTime). Set
// TRAJRING_HOSTTIME=1 to run it; TRAJRING_HOSTTIME_OUT=file also writes
// the table there.
func TestDeviceSelectionHostTime(t *testing.T) {
	if os.Getenv("TRAJRING_HOSTTIME") == "" {
		t.Skip("set TRAJRING_HOSTTIME=1 to measure host time")
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	const B, calls, rounds = 256, 4000, 16
	var sb strings.Builder
	fmt.Fprintf(&sb, "%-38s %14s %14s %14s %9s %9s\n", "SampleInto B=256", "gpu dev-sel µs", "gpu host-sel µs", "cpu whole µs", "dev/cpu", "launches")
	for _, c := range []struct {
		sel                    tensorbuf.Selector
		rows                   string
		envs, capacity, perRow int
	}{
		{tensorbuf.Uniform, "low-dim", 256, 64, 32},
		{tensorbuf.Uniform, "3KB", 256, 64, 32},
		{tensorbuf.Uniform, "low-dim", 1024, 512, 256},
		{tensorbuf.Prioritized, "low-dim", 256, 64, 32},
		{tensorbuf.Prioritized, "3KB", 256, 64, 32},
		{tensorbuf.Prioritized, "low-dim", 1024, 512, 256},
	} {
		name := fmt.Sprintf("%v %s, %d items", c.sel, c.rows, c.envs*c.perRow)
		modes := []string{"dev", "host", "cpu"}
		setups := make([]*hostTimeSetup, len(modes))
		for i, mode := range modes {
			setups[i] = newHostTimeSetup(t, mode, c.sel, c.rows, c.envs, c.capacity, c.perRow,
				func(r int, s int64) tensorbuf.Item {
					return tensorbuf.Item{Row: r, Start: s * int64(c.capacity/c.perRow), Len: 1}
				})
		}
		runs := make([]hostRun, len(setups))
		for i, su := range setups {
			runs[i] = hostRun{be: su.be, run: func(k int) { su.run(t, B, k) }}
		}
		sb.WriteString(hostTimeRow(t, setups[0].g, runs, calls, rounds, "%-38s %14.2f %14.1f %14.1f %8.3fx %9.1f\n", name))
		for _, su := range setups {
			su.close()
		}
	}
	reportHostTimes(t, sb.String())
}

// hostTimeSetup is one table of TestDeviceSelectionHostTime: a buffer of
// envs rows of capacity steps on the gpu backend with device selection
// (mode "dev") or host selection ("host"), or on the cpu backend ("cpu"),
// and perRow items per row, as item makes them (with priorities 1 to 9).
type hostTimeSetup struct {
	be  tensorbuf.Backend
	g   *gpu.Backend
	buf *tensorbuf.Buffer
	tbl *tensorbuf.Table
	bt  *tensorbuf.Batch
}

func newHostTimeSetup(t *testing.T, mode string, sel tensorbuf.Selector, rows string, envs, capacity, perRow int, item func(r int, s int64) tensorbuf.Item) *hostTimeSetup {
	t.Helper()
	su := &hostTimeSetup{bt: new(tensorbuf.Batch)}
	if mode == "cpu" {
		su.be = cpu.New()
	} else {
		var err error
		if su.g, err = gpu.New(); err != nil {
			t.Fatal(err)
		}
		su.be = su.g
	}
	fields := hostTimeFields[rows]
	var err error
	if su.buf, err = tensorbuf.New(tensorbuf.Config{NumEnvs: envs, Capacity: capacity, Fields: fields, Seed: 1, Backend: su.be}); err != nil {
		t.Fatal(err)
	}
	w, err := su.buf.NewWriter()
	if err != nil {
		t.Fatal(err)
	}
	step := fullStep(fields, envs)
	for range capacity {
		if err := w.Add(step); err != nil {
			t.Fatal(err)
		}
	}
	if su.tbl, err = su.buf.NewTable(tensorbuf.TableConfig{Name: "t", Selector: sel, Beta: 0.4, Seed: 5, DeviceSelection: mode == "dev"}); err != nil {
		t.Fatal(err)
	}
	for r := range envs {
		for s := range int64(perRow) {
			it := item(r, s)
			it.Priority = float64(1 + (r+int(s))%9)
			if _, err := su.tbl.Insert(it); err != nil {
				t.Fatal(err)
			}
		}
	}
	return su
}

// run samples n items k times.
func (su *hostTimeSetup) run(t *testing.T, n, k int) {
	ctx := context.Background()
	for range k {
		if err := su.tbl.SampleInto(ctx, su.bt, n); err != nil {
			t.Fatal(err)
		}
	}
}

func (su *hostTimeSetup) close() {
	_ = su.be.Sync()
	_ = su.bt.Release()
	_ = su.buf.Close()
	if su.g != nil {
		_ = su.g.Close()
	}
}

// BenchmarkDeviceSelection times SampleInto of a DeviceSelection table on
// the gpu backend (L=1, low-dim steps, 256 rows of 1024 steps, 262,144
// items), uniform and prioritized (Beta 0.4), at B=256 and B=65,536, a
// prioritized one after an insert and a delete (the mirror patch and tree
// repair), and UpdatePrioritiesDevice of the batch's keys. It reports:
//
//	us/op        µs per call, calls queued back to back (one Sync at the end)
//	p50_us       latency of one call waited for on its own (call + Sync)
//	host_us      the calling thread's CPU time per call, calls queued back
//	             to back, less the stand-in's device time (on a GPU: all of
//	             it host time)
//	launches/op  kernel launches per call
//
// bench/gpu-check.sh runs it on a GPU; on the stand-in only host_us and
// launches/op mean anything.
func BenchmarkDeviceSelection(b *testing.B) {
	for _, bc := range []struct {
		name   string
		sel    tensorbuf.Selector
		n      int
		update bool
		insert bool // an insert and a delete before each sample
	}{
		{"uniform/B256", tensorbuf.Uniform, 256, false, false},
		{"uniform/B65536", tensorbuf.Uniform, 65536, false, false},
		{"prioritized/B256", tensorbuf.Prioritized, 256, false, false},
		{"prioritized/B65536", tensorbuf.Prioritized, 65536, false, false},
		{"prioritized+insert/B256", tensorbuf.Prioritized, 256, false, true},
		{"update/B256", tensorbuf.Prioritized, 256, true, false},
		{"update/B65536", tensorbuf.Prioritized, 65536, true, false},
	} {
		b.Run(bc.name, func(b *testing.B) {
			g, err := gpu.New()
			if err != nil {
				b.Skipf("no gpu backend: %v", err)
			}
			defer g.Close()
			const envs, capacity = 256, 1024
			fields := hostTimeFields["low-dim"]
			buf, err := tensorbuf.New(tensorbuf.Config{NumEnvs: envs, Capacity: capacity, Fields: fields, Seed: 1, Backend: g})
			if err != nil {
				b.Fatal(err)
			}
			defer buf.Close()
			w, err := buf.NewWriter()
			if err != nil {
				b.Fatal(err)
			}
			step := fullStep(fields, envs)
			for range capacity {
				if err := w.Add(step); err != nil {
					b.Fatal(err)
				}
			}
			tbl, err := buf.NewTable(tensorbuf.TableConfig{Name: "t", Selector: bc.sel, Beta: 0.4, Seed: 5, DeviceSelection: true})
			if err != nil {
				b.Fatal(err)
			}
			for r := range envs {
				for s := range int64(capacity) {
					if _, err := tbl.Insert(tensorbuf.Item{Row: r, Start: s, Len: 1, Priority: float64(1 + (r+int(s))%9)}); err != nil {
						b.Fatal(err)
					}
				}
			}
			ctx := context.Background()
			bt := new(tensorbuf.Batch)
			defer bt.Release()
			if err := tbl.SampleInto(ctx, bt, bc.n); err != nil {
				b.Fatal(err)
			}
			op := func() error { return tbl.SampleInto(ctx, bt, bc.n) }
			if bc.insert {
				op = func() error {
					k, err := tbl.Insert(tensorbuf.Item{Row: 3, Start: 500, Len: 1, Priority: 2.5})
					if err != nil {
						return err
					}
					tbl.Delete(k)
					return tbl.SampleInto(ctx, bt, bc.n)
				}
			}
			if bc.update {
				a, err := g.Alloc(int64(4 * bc.n))
				if err != nil {
					b.Fatal(err)
				}
				prios, err := g.Tensor(a, 0, tensor.Float32, bc.n)
				if err != nil {
					b.Fatal(err)
				}
				op = func() error { return tbl.UpdatePrioritiesDevice(bt.KeyTensor, prios) }
			}
			if err := op(); err != nil { // warm up (the first insert grows the tree)
				b.Fatal(err)
			}
			if err := g.Sync(); err != nil {
				b.Fatal(err)
			}
			run := func(k int) (time.Duration, error) {
				runtime.LockOSThread()
				defer runtime.UnlockOSThread()
				d0, _ := gpu.StandinDeviceTime()
				c0 := threadCPU(b)
				for range k {
					if err := op(); err != nil {
						return 0, err
					}
				}
				c1 := threadCPU(b)
				d1, _ := gpu.StandinDeviceTime()
				return (c1 - c0 - (d1 - d0)) / time.Duration(k), g.Sync()
			}
			host, err := run(100)
			if err != nil {
				b.Fatal(err)
			}
			l0 := g.Launches()
			lat := make([]time.Duration, 0, 64)
			for range 64 {
				t0 := time.Now()
				if err := op(); err != nil {
					b.Fatal(err)
				}
				if err := g.Sync(); err != nil {
					b.Fatal(err)
				}
				lat = append(lat, time.Since(t0))
			}
			launches := float64(g.Launches()-l0) / 64
			slices.Sort(lat)
			b.ResetTimer()
			for range b.N {
				if err := op(); err != nil {
					b.Fatal(err)
				}
			}
			if err := g.Sync(); err != nil {
				b.Fatal(err)
			}
			b.StopTimer()
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/1e3/float64(b.N), "us/op")
			b.ReportMetric(float64(lat[len(lat)/2].Nanoseconds())/1e3, "p50_us")
			b.ReportMetric(float64(host.Nanoseconds())/1e3, "host_us")
			b.ReportMetric(launches, "launches/op")
		})
	}
}
