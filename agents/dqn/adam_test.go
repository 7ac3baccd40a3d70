package dqn

import (
	"math/rand/v2"
	"testing"

	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// TestAdamMatchesGorgonia: our Adam gives bit for bit the weights of
// gorgonia v0.9.18's AdamSolver (which it replaces because that keeps its
// moments unexported) over 50 steps of random gradients, and zeroes the
// gradients as it does.
func TestAdamMatchesGorgonia(t *testing.T) {
	const lr = 2.3e-3
	sizes := []int{12, 3, 7, 67}
	rng := rand.New(rand.NewPCG(1, 2))
	g := gorgonia.NewGraph()
	var nodes gorgonia.Nodes
	var ws, gs [][]float32
	for i, n := range sizes {
		w := make([]float32, n)
		for j := range w {
			w[j] = float32(rng.NormFloat64())
		}
		ws = append(ws, append([]float32(nil), w...))
		gs = append(gs, make([]float32, n))
		node := gorgonia.NewVector(g, tensor.Float32, gorgonia.WithShape(n), gorgonia.WithName(string(rune('a'+i))),
			gorgonia.WithValue(tensor.New(tensor.WithShape(n), tensor.WithBacking(w))),
			gorgonia.WithGrad(tensor.New(tensor.WithShape(n), tensor.Of(tensor.Float32))))
		nodes = append(nodes, node)
	}
	solver := gorgonia.NewAdamSolver(gorgonia.WithLearnRate(lr))
	ours := newAdam(lr, sizes)
	for step := range 50 {
		for i, node := range nodes {
			gv, err := node.Grad()
			if err != nil {
				t.Fatal(err)
			}
			theirs := gv.Data().([]float32)
			for j := range gs[i] {
				v := float32(rng.NormFloat64() * 0.1 * float64(step%7+1))
				gs[i][j], theirs[j] = v, v
			}
		}
		if err := solver.Step(gorgonia.NodesToValueGrads(nodes)); err != nil {
			t.Fatal(err)
		}
		ours.step(ws, gs)
		for i, node := range nodes {
			want := node.Value().Data().([]float32)
			for j := range want {
				if ws[i][j] != want[j] || gs[i][j] != 0 {
					t.Fatalf("step %d, param %d[%d]: weight %v, gorgonia %v; gradient %v", step, i, j, ws[i][j], want[j], gs[i][j])
				}
			}
		}
	}
	if ours.t != 50 {
		t.Fatalf("step count %d", ours.t)
	}
}
