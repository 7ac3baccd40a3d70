package tensorbuf_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/trajring/trajring/tensorbuf"
	"gorgonia.org/tensor"
)

// hotFixture is a low-dimensional buffer (108-byte steps, as the bench
// harness's lowdim layout) of 16 rows x 62,500 steps with a uniform and a
// prioritized table (PriorityExponent 0.6, Beta 0.4) over the same
// items: one item of one step per stored step of the first four rows
// (250,000 items), priorities 1..16 cycling, as the harness fills them.
// TRAJRING_HOTROWS=16 puts items on every row (1M items, as the full
// bench's prioritized rows).
func hotFixture(tb testing.TB) (*tensorbuf.Buffer, *tensorbuf.Table, *tensorbuf.Table) {
	tb.Helper()
	const envs, capacity = 16, 62500
	itemRows := 4
	if r, err := strconv.Atoi(os.Getenv("TRAJRING_HOTROWS")); err == nil && r > 0 && r <= envs {
		itemRows = r
	}
	fields := []tensorbuf.Field{
		{Name: "obs", Role: tensorbuf.Observation, DType: tensorbuf.Float32, Shape: []int{17}},
		{Name: "action", Role: tensorbuf.Action, DType: tensorbuf.Float32, Shape: []int{6}},
	}
	b, err := tensorbuf.New(tensorbuf.Config{NumEnvs: envs, Capacity: capacity, Fields: fields, Seed: 1})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = b.Close() })
	w, err := b.NewWriter()
	if err != nil {
		tb.Fatal(err)
	}
	rows := w.Rows()
	st := &tensorbuf.Step{Rows: rows, Values: map[string]*tensor.Dense{
		"obs":    tensor.New(tensor.WithShape(len(rows), 17), tensor.WithBacking(make([]float32, len(rows)*17))),
		"action": tensor.New(tensor.WithShape(len(rows), 6), tensor.WithBacking(make([]float32, len(rows)*6))),
	}}
	for range rows {
		st.StepType = append(st.StepType, tensorbuf.Mid)
		st.NextStepType = append(st.NextStepType, tensorbuf.Mid)
		st.Reward = append(st.Reward, 1)
		st.Discount = append(st.Discount, 1)
	}
	for range capacity {
		if err := w.Add(st); err != nil {
			tb.Fatal(err)
		}
	}
	_ = w.Close()
	var tables []*tensorbuf.Table
	for _, cfg := range []tensorbuf.TableConfig{
		{Name: "uniform", Selector: tensorbuf.Uniform, Seed: 13},
		{Name: "prioritized", Selector: tensorbuf.Prioritized, PriorityExponent: 0.6, Beta: 0.4, Seed: 13},
	} {
		t, err := b.NewTable(cfg)
		if err != nil {
			tb.Fatal(err)
		}
		k := 0
		for row := range itemRows {
			for s := b.Oldest(row); s < b.Cursor(row); s++ {
				k++
				if _, err := t.Insert(tensorbuf.Item{Row: row, Start: s, Len: 1, Priority: float64(1 + k%16)}); err != nil {
					tb.Fatal(err)
				}
			}
		}
		tables = append(tables, t)
	}
	return b, tables[0], tables[1]
}

// TestTableSampleHostSpeed times a uniform and a prioritized table sample
// of the same rows (L=1 low-dim) interleaved, round after round, and logs
// the median time of each and the median prioritized/uniform ratio, for
// SampleInto and SampleTransitionsInto at B=256 and B=65536. It runs only
// with TRAJRING_HOTBENCH=1.
func TestTableSampleHostSpeed(t *testing.T) {
	if os.Getenv("TRAJRING_HOTBENCH") == "" {
		t.Skip("set TRAJRING_HOTBENCH=1")
	}
	_, uni, pri := hotFixture(t)
	ctx := context.Background()
	for _, n := range []int{256, 65536} {
		for _, kind := range []string{"SampleInto", "SampleTransitionsInto"} {
			bts := [2]*tensorbuf.Batch{new(tensorbuf.Batch), new(tensorbuf.Batch)}
			trs := [2]*tensorbuf.TableTransitions{new(tensorbuf.TableTransitions), new(tensorbuf.TableTransitions)}
			call := func(i int, tbl *tensorbuf.Table) error {
				if kind == "SampleInto" {
					return tbl.SampleInto(ctx, bts[i], n)
				}
				return tbl.SampleTransitionsInto(ctx, trs[i], n, tensorbuf.NStepOptions{Horizon: 1, DiscountFactor: 1})
			}
			reps := max(1, 16384/n)
			var us, ps, rs []float64
			for round := range 31 {
				var d [2]time.Duration
				for i, tbl := range []*tensorbuf.Table{uni, pri} {
					t0 := time.Now()
					for range reps {
						if err := call(i, tbl); err != nil {
							t.Fatal(err)
						}
					}
					d[i] = time.Since(t0) / time.Duration(reps)
				}
				if round == 0 {
					continue // warm-up
				}
				us, ps = append(us, float64(d[0])), append(ps, float64(d[1]))
				rs = append(rs, float64(d[1])/float64(d[0]))
			}
			med := func(x []float64) float64 { slices.Sort(x); return x[len(x)/2] }
			t.Logf("%-22s B=%-6d uniform %8.1f µs  prioritized %8.1f µs  prioritized/uniform %.2fx", kind, n,
				med(us)/1e3, med(ps)/1e3, med(rs))
			_ = bts[0].Release()
			_ = bts[1].Release()
		}
	}
}

// BenchmarkTableSampleHot samples the hotFixture's tables, for profiles
// of the host side of a table sample.
func BenchmarkTableSampleHot(b *testing.B) {
	_, uni, pri := hotFixture(b)
	ctx := context.Background()
	for _, n := range []int{1, 256, 65536} {
		for _, tbl := range []*tensorbuf.Table{uni, pri} {
			b.Run(fmt.Sprintf("%s/B=%d", tbl.Name(), n), func(b *testing.B) {
				benchSampleInto(b, func(bt *tensorbuf.Batch) error { return tbl.SampleInto(ctx, bt, n) })
			})
		}
	}
}

// BenchmarkUpdatePrioritiesHot updates the priorities of a B=256 sample of
// the hotFixture's prioritized table.
func BenchmarkUpdatePrioritiesHot(b *testing.B) {
	_, _, pri := hotFixture(b)
	bt, err := pri.Sample(context.Background(), 256)
	if err != nil {
		b.Fatal(err)
	}
	defer bt.Release()
	ps := make([]float64, len(bt.Keys))
	for i := range ps {
		ps[i] = float64(1 + i%16)
	}
	b.ReportAllocs()
	for b.Loop() {
		if err := pri.UpdatePriorities(bt.Keys, ps); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkAddEvictHot adds steps of all 16 rows to the full hotFixture
// ring (every add evicts one item per table from each of the four item
// rows).
func BenchmarkAddEvictHot(b *testing.B) {
	buf, uni, pri := hotFixture(b)
	w, err := buf.NewWriter()
	if err != nil {
		b.Fatal(err)
	}
	defer w.Close()
	rows := w.Rows()
	st := &tensorbuf.Step{Rows: rows, Values: map[string]*tensor.Dense{
		"obs":    tensor.New(tensor.WithShape(len(rows), 17), tensor.WithBacking(make([]float32, len(rows)*17))),
		"action": tensor.New(tensor.WithShape(len(rows), 6), tensor.WithBacking(make([]float32, len(rows)*6))),
	}}
	for range rows {
		st.StepType = append(st.StepType, tensorbuf.Mid)
		st.NextStepType = append(st.NextStepType, tensorbuf.Mid)
		st.Reward = append(st.Reward, 1)
		st.Discount = append(st.Discount, 1)
	}
	b.ReportAllocs()
	for b.Loop() {
		if err := w.Add(st); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	_, _ = uni.Size(), pri.Size()
}

// benchSampleInto times sample into one reused batch, reporting
// allocations.
func benchSampleInto(b *testing.B, sample func(bt *tensorbuf.Batch) error) {
	var bt tensorbuf.Batch
	defer bt.Release()
	b.ReportAllocs()
	for b.Loop() {
		if err := sample(&bt); err != nil {
			b.Fatal(err)
		}
	}
}
