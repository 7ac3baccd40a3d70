package envs

import (
	"testing"

	"gorgonia.org/tensor"
)

// BenchmarkCartPoleStep256 steps 256 cart-poles with a fixed action
// pattern, the batch the Python collection row (issue 41) uses.
func BenchmarkCartPoleStep256(b *testing.B) {
	const n = 256
	c, err := NewCartPole(n, 1)
	if err != nil {
		b.Fatal(err)
	}
	a := make([]int64, n)
	for i := range a {
		a[i] = int64(i % 2)
	}
	act := map[string]*tensor.Dense{CartPoleActionName: tensor.New(tensor.WithShape(n), tensor.WithBacking(a))}
	if _, err := c.Reset(); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := c.Step(act); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/env-step")
}
