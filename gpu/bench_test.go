//go:build trajring_cuda

package gpu

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/trajring/trajring/kernels"
)

// The GPU benchmarks time each operation over b.N calls (launches are
// asynchronous; the clock stops after a Sync) and then, in the same run, a
// device-to-device copy of the same number of bytes from the same ring,
// the physical ceiling. They report:
//
//	GB/s      effective bandwidth 2*bytes/t (bytes read + written)
//	copyGB/s  the same for the copy of the same bytes
//	of_copy   t(copy) / t(operation): the fraction of the ceiling reached
//	us/op     microseconds per call, host work and launch included, calls
//	          queued back to back
//	p50_us, p99_us  latency of one call waited for on its own (call + Sync)
//
// Index sets rotate over many random draws so the data does not stay in
// the L2 cache between calls; the copy rotates its source the same way.
// With -short the rings are small, for smoke runs on the stand-in driver.

type benchCase struct {
	name     string
	kind     string  // gather, windows, scatter, concat
	fields   []int64 // step bytes of each column; column 0 is the observation
	rows     int64   // env rows of the ring
	capacity int64   // steps per row
	batch    int64   // items per call (scatter: one step for each of batch rows)
	seqLen   int64   // windows only
}

// lowDim is a low-dimensional step: 16 float32 observations, an int32
// action, reward and discount, step_type and next_step_type.
var lowDim = []int64{64, 4, 4, 4, 1, 1}

// pixels is a 32x32x3 uint8 observation step with the same small columns.
var pixels = []int64{3072, 4, 4, 4, 1, 1}

var benchCases = []benchCase{
	{name: "gather/B256/pixels/1M", kind: "gather", fields: pixels, rows: 16, capacity: 1 << 16, batch: 256},
	{name: "gather/B65536/lowdim/1M", kind: "gather", fields: lowDim, rows: 16, capacity: 1 << 16, batch: 65536},
	{name: "windows/B256/L1/pixels/1M", kind: "windows", fields: pixels, rows: 16, capacity: 1 << 16, batch: 256, seqLen: 1},
	{name: "windows/B256/L4/lowdim/1M", kind: "windows", fields: lowDim, rows: 16, capacity: 1 << 16, batch: 256, seqLen: 4},
	{name: "windows/B256/L64/lowdim/1M", kind: "windows", fields: lowDim, rows: 16, capacity: 1 << 16, batch: 256, seqLen: 64},
	{name: "windows/B65536/L4/lowdim/1M", kind: "windows", fields: lowDim, rows: 16, capacity: 1 << 16, batch: 65536, seqLen: 4},
	{name: "scatter/envs1024/pixels", kind: "scatter", fields: pixels, rows: 1024, capacity: 1024, batch: 1024},
	{name: "scatter/envs4096/lowdim", kind: "scatter", fields: lowDim, rows: 4096, capacity: 256, batch: 4096},
	{name: "concat/N65536/pixels", kind: "concat", fields: pixels, rows: 16, capacity: 1 << 16, batch: 65536},
}

// rotations is how many index sets a benchmark cycles through.
const rotations = 64

func BenchmarkOps(b *testing.B) {
	be := newBackend(b)
	for _, bc := range benchCases {
		b.Run(bc.name, func(b *testing.B) { runBench(b, be, bc) })
	}
}

func runBench(b *testing.B, be *Backend, bc benchCase) {
	if testing.Short() {
		bc.capacity = min(bc.capacity, 256)
		bc.rows = min(bc.rows, 64)
		bc.batch = min(bc.batch, bc.rows*bc.capacity/2, 1024)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	steps := bc.rows * bc.capacity
	var stepBytes int64
	for _, s := range bc.fields {
		stepBytes += s
	}
	alloc := func(n int64) kernels.Arena {
		a, err := be.Alloc(n)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = be.Free(a) })
		return a
	}
	// Output steps per call and bytes moved per call.
	n := bc.batch
	switch bc.kind {
	case "windows":
		n = bc.batch * bc.seqLen
	case "scatter":
		n = bc.rows
	}
	moved := n * stepBytes
	if bc.kind == "windows" {
		moved += n // the mask
	}
	if bc.kind == "concat" {
		moved += n * bc.fields[0] // successor observations
	}
	cols := make([]kernels.Column, len(bc.fields))
	for c, s := range bc.fields {
		cols[c] = kernels.Column{Ring: alloc(steps * s), StepBytes: s, Out: alloc(n * s)}
	}
	if bc.kind == "concat" {
		cols[0].NextOut = alloc(n * bc.fields[0])
	}
	var mask kernels.Arena
	if bc.kind == "windows" {
		mask = alloc(n)
	}

	idx := make([][]int64, rotations)
	next := make([][]int64, rotations)
	wins := make([][]kernels.Window, rotations)
	for r := range rotations {
		switch bc.kind {
		case "gather", "concat":
			idx[r], next[r] = make([]int64, n), make([]int64, n)
			for i := range idx[r] {
				row, slot := rng.Int64N(bc.rows), rng.Int64N(bc.capacity)
				idx[r][i] = row*bc.capacity + slot
				next[r][i] = row*bc.capacity + (slot+1)%bc.capacity
			}
		case "windows":
			wins[r] = make([]kernels.Window, bc.batch)
			for i := range wins[r] {
				wins[r][i] = kernels.Window{Row: rng.Int64N(bc.rows), Start: rng.Int64N(1 << 40), Len: bc.seqLen}
			}
		case "scatter":
			idx[r] = make([]int64, bc.rows)
			slot := int64(r) % bc.capacity
			for row := range idx[r] {
				idx[r][row] = int64(row)*bc.capacity + slot
			}
		}
	}
	var src [][]byte
	if bc.kind == "scatter" {
		src = make([][]byte, len(bc.fields))
		for c, s := range bc.fields {
			src[c] = make([]byte, bc.rows*s)
			for i := range src[c] {
				src[c][i] = byte(rng.Uint32())
			}
		}
	}
	op := func(i int) error {
		r := i % rotations
		switch bc.kind {
		case "gather":
			return be.GatherRows(cols, idx[r])
		case "concat":
			return be.Concat(cols, idx[r], next[r])
		case "windows":
			return be.GatherWindows(cols, wins[r], bc.seqLen, bc.capacity, mask, 0)
		default:
			return be.Scatter(cols, src, idx[r])
		}
	}
	// The ceiling: one copy of the same bytes, from a rotating place in
	// the largest ring into a separate output.
	ring0 := cols[0].Ring.(*Arena)
	copyOut := alloc(moved)
	copySrc := ring0
	if ring0.size < moved {
		copySrc = alloc(moved).(*Arena)
	}
	spots := max(copySrc.size/moved, 1)
	cp := func(i int) error {
		return be.Copy(copyOut, 0, copySrc, (int64(i)%min(spots, rotations))*moved, moved)
	}

	for i := range 3 { // warm up: staging buffers, module JIT, caches
		if err := op(i); err != nil {
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
	for i := range b.N {
		if err := op(i); err != nil {
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
	// Latency: each call waited for on its own (Sync), as a learner that
	// uses the batch at once sees it.
	lat := make([]float64, min(b.N, 200))
	for i := range lat {
		t0 := time.Now()
		if err := op(i); err != nil {
			b.Fatal(err)
		}
		if err := be.Sync(); err != nil {
			b.Fatal(err)
		}
		lat[i] = time.Since(t0).Seconds() * 1e6
	}
	slices.Sort(lat)
	b.ReportMetric(lat[len(lat)/2], "p50_us")
	b.ReportMetric(lat[min(len(lat)-1, len(lat)*99/100)], "p99_us")
	perOp := tOp.Seconds() / float64(b.N)
	perCopy := tCopy.Seconds() / float64(b.N)
	b.ReportMetric(2*float64(moved)/perOp/1e9, "GB/s")
	b.ReportMetric(2*float64(moved)/perCopy/1e9, "copyGB/s")
	b.ReportMetric(perCopy/perOp, "of_copy")
	b.ReportMetric(perOp*1e6, "us/op")
}
