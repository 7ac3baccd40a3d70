//go:build trajring_cuda

package tensorbuf_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/trajring/trajring/gpu"
	"github.com/trajring/trajring/tensorbuf"
	"gorgonia.org/tensor"
)

// BenchmarkDevice times the buffer-level calls a GPU training loop makes,
// on the gpu backend, and in the same run a device-to-device copy of the
// same number of output bytes (the physical ceiling). It reports:
//
//	us/op          µs per call, calls queued back to back (host work,
//	               staging and launches included; one Sync at the end)
//	p50_us, p99_us latency of one call waited for on its own (call + Sync)
//	of_d2d         t(copy of the output bytes) / t(call): the fraction of
//	               the ceiling reached
//	out_MB         bytes written per call (every output tensor), in MB
//
// Rings hold 1M steps (256 rows of 4,096; tables hold 65,536 items), or
// 16 rows of 256 with -short
// (smoke runs on the stand-in driver, where the figures mean nothing).
// bench/gpu-check.sh runs it on a GPU.
func BenchmarkDevice(b *testing.B) {
	for _, bc := range []struct {
		name string
		kind string // sample, transitions, nstep, add, add-device, export
		rows string // low-dim or 3KB (hostTimeFields)
		n, l int    // items per call (add: env rows), steps per item
	}{
		{"sample/B256/L1/lowdim", "sample", "low-dim", 256, 1},
		{"sample/B256/L8/lowdim", "sample", "low-dim", 256, 8},
		{"sample/B256/L1/3KB", "sample", "3KB", 256, 1},
		{"sample/B256/L8/3KB", "sample", "3KB", 256, 8},
		{"transitions/B256/lowdim", "transitions", "low-dim", 256, 1},
		{"transitions/B256/3KB", "transitions", "3KB", 256, 1},
		{"nstep/B256/n3/lowdim", "nstep", "low-dim", 256, 3},
		{"add/W256/lowdim", "add", "low-dim", 256, 1},
		{"add/W1024/lowdim", "add", "low-dim", 1024, 1},
		{"add/W1024/3KB", "add", "3KB", 1024, 1},
		{"add/W1024/3KB/device", "add-device", "3KB", 1024, 1}, // fields from device tensors of the backend
		{"export/1M/lowdim", "export", "low-dim", 0, 1},
	} {
		b.Run(bc.name, func(b *testing.B) {
			be, err := gpu.New()
			if err != nil {
				b.Skipf("no gpu backend: %v", err)
			}
			defer be.Close()
			// 256 rows of 4,096 steps: 1M steps filled in 4,096 adds.
			rows, capacity := 256, 1<<12
			if testing.Short() {
				rows, capacity = 16, 256
			}
			if bc.kind == "add" || bc.kind == "add-device" {
				rows, capacity = bc.n, 64
			}
			fields := hostTimeFields[bc.rows]
			buf, err := tensorbuf.New(tensorbuf.Config{NumEnvs: rows, Capacity: capacity, Fields: fields, Seed: 1, Backend: be})
			if err != nil {
				b.Fatal(err)
			}
			defer buf.Close()
			w, err := buf.NewWriter()
			if err != nil {
				b.Fatal(err)
			}
			step := fullStep(fields, rows)
			fillSteps := capacity
			if bc.kind == "add" || bc.kind == "add-device" {
				fillSteps = 1
			}
			for range fillSteps {
				if err := w.Add(step); err != nil {
					b.Fatal(err)
				}
			}
			ctx := context.Background()
			bt, tr := new(tensorbuf.Batch), new(tensorbuf.Transitions)
			defer bt.Release()
			defer tr.Release()
			var op func() error
			var out func() int64 // output bytes of the last call
			switch bc.kind {
			case "sample":
				tbl, err := buf.NewTable(tensorbuf.TableConfig{Name: "t", Seed: 1})
				if err != nil {
					b.Fatal(err)
				}
				for r := range rows {
					for s := 0; s+bc.l <= capacity; s += max(1, capacity/256) {
						if _, err := tbl.Insert(tensorbuf.Item{Row: r, Start: int64(s), Len: bc.l}); err != nil {
							b.Fatal(err)
						}
					}
				}
				op = func() error { return tbl.SampleInto(ctx, bt, bc.n) }
				out = func() int64 { return outBytes(batchTensors(bt)) }
			case "transitions":
				op = func() error { return buf.SampleTransitionsInto(tr, bc.n) }
				out = func() int64 { return transitionBytes(tr) }
			case "nstep":
				opt := tensorbuf.NStepOptions{Horizon: bc.l, DiscountFactor: 0.99}
				op = func() error { return buf.SampleNStepInto(tr, bc.n, opt) }
				out = func() int64 { return transitionBytes(tr) }
			case "add", "add-device":
				if bc.kind == "add-device" {
					step = deviceStep(b, be, fields, step)
				}
				op = func() error { return w.Add(step) }
				out = func() int64 { // the step's fields and 10 bytes of built-in columns per row
					return outBytes(step.Values) + int64(rows)*10
				}
			case "export":
				var last []*tensorbuf.Transitions
				op = func() error {
					for _, x := range last {
						_ = x.Release()
					}
					var err error
					last, err = buf.AllExperiences(tensorbuf.ExportBatch)
					return err
				}
				out = func() int64 { return transitionBytes(last[0]) }
				defer func() {
					for _, x := range last {
						_ = x.Release()
					}
				}()
			}
			if err := op(); err != nil {
				b.Fatal(err)
			}
			runDeviceBench(b, be, op, out())
		})
	}
}

// runDeviceBench times op as BenchmarkDevice describes, and a device copy
// of moved bytes through a rotating window of a larger source.
func runDeviceBench(b *testing.B, be *gpu.Backend, op func() error, moved int64) {
	src, err := be.Alloc(max(64*moved, 1<<20))
	if err != nil {
		b.Fatal(err)
	}
	defer be.Free(src)
	dst, err := be.Alloc(moved)
	if err != nil {
		b.Fatal(err)
	}
	defer be.Free(dst)
	cp := func(i int) error { return be.Copy(dst, 0, src, int64(i%64)*moved, moved) }
	for i := range 3 { // warm up
		if err := op(); err != nil {
			b.Fatal(err)
		}
		if err := cp(i); err != nil {
			b.Fatal(err)
		}
	}
	if err := be.Sync(); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(moved)
	b.ResetTimer()
	start := time.Now()
	for range b.N {
		if err := op(); err != nil {
			b.Fatal(err)
		}
	}
	if err := be.Sync(); err != nil {
		b.Fatal(err)
	}
	tOp := time.Since(start)
	b.StopTimer()
	start = time.Now()
	for i := range b.N {
		if err := cp(i); err != nil {
			b.Fatal(err)
		}
	}
	if err := be.Sync(); err != nil {
		b.Fatal(err)
	}
	tCopy := time.Since(start)
	lat := make([]time.Duration, min(b.N, 200))
	for i := range lat {
		t0 := time.Now()
		if err := op(); err != nil {
			b.Fatal(err)
		}
		if err := be.Sync(); err != nil {
			b.Fatal(err)
		}
		lat[i] = time.Since(t0)
	}
	slices.Sort(lat)
	us := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e3 }
	b.ReportMetric(us(lat[len(lat)/2]), "p50_us")
	b.ReportMetric(us(lat[len(lat)*99/100]), "p99_us")
	b.ReportMetric(float64(tCopy)/float64(tOp), "of_d2d")
	b.ReportMetric(float64(moved)/1e6, "out_MB")
}

// outBytes returns the bytes of a set of output tensors.
func outBytes(ts map[string]*tensor.Dense) int64 {
	var n int64
	for _, t := range ts {
		n += int64(t.MemSize())
	}
	return n
}

// transitionBytes returns the bytes of every output tensor of tr,
// successor observations included.
func transitionBytes(tr *tensorbuf.Transitions) int64 {
	n := outBytes(transitionTensors(tr))
	for _, t := range tr.NextObservation {
		n += int64(t.MemSize())
	}
	return n
}
