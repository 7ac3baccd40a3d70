package tensorbuf_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/trajring/trajring/tensorbuf"
)

// BenchmarkUniformTableVsDirect samples B=256 L=1 windows from the
// hotFixture (TRAJRING_HOTROWS=16 for an item per stored step, as the
// "python table.sample" rows) through the uniform table and through the
// direct uniform sampler, for profiles of what a table selection adds.
func BenchmarkUniformTableVsDirect(b *testing.B) {
	buf, uni, _ := hotFixture(b)
	ctx := context.Background()
	for _, n := range []int{1, 256} {
		b.Run(fmt.Sprintf("table/B=%d", n), func(b *testing.B) {
			benchSampleInto(b, func(bt *tensorbuf.Batch) error { return uni.SampleInto(ctx, bt, n) })
		})
		b.Run(fmt.Sprintf("direct/B=%d", n), func(b *testing.B) {
			benchSampleInto(b, func(bt *tensorbuf.Batch) error {
				return buf.SampleSequencesInto(bt, n, 1, tensorbuf.SequenceOptions{})
			})
		})
	}
}

// TestUniformTableSpeed logs the median times of a B=256 L=1 sample of
// the hotFixture through the uniform table and through the direct
// sampler, interleaved round after round with the order alternating (the
// call after the other's runs on a colder cache), and their ratio. It
// runs only with TRAJRING_HOTBENCH=1 (TRAJRING_HOTROWS=16: an item per
// stored step, as the python table.sample rows).
func TestUniformTableSpeed(t *testing.T) {
	if os.Getenv("TRAJRING_HOTBENCH") == "" {
		t.Skip("set TRAJRING_HOTBENCH=1")
	}
	buf, uni, _ := hotFixture(t)
	ctx := context.Background()
	var b1, b2 tensorbuf.Batch
	defer b1.Release()
	defer b2.Release()
	calls := [2]func() error{
		func() error { return uni.SampleInto(ctx, &b1, 256) },
		func() error { return buf.SampleSequencesInto(&b2, 256, 1, tensorbuf.SequenceOptions{}) },
	}
	var ds [2][]float64
	var rs []float64
	for round := range 301 {
		var d [2]float64
		for j := range 2 {
			i := (j + round) % 2
			t0 := time.Now()
			for range 20 {
				if err := calls[i](); err != nil {
					t.Fatal(err)
				}
			}
			d[i] = float64(time.Since(t0)) / 20 / 1e3
		}
		if round > 0 {
			ds[0], ds[1] = append(ds[0], d[0]), append(ds[1], d[1])
			rs = append(rs, d[0]/d[1])
		}
	}
	med := func(x []float64) float64 { slices.Sort(x); return x[len(x)/2] }
	t.Logf("B=256 L=1: uniform table %.1f µs, direct %.1f µs, table/direct %.2fx (medians)", med(ds[0]), med(ds[1]), med(rs))
}
