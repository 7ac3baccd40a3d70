package dqn

import (
	"math"

	"github.com/trajring/trajring/internal/adamstep"
)

// adam is Adam (Kingma and Ba) over float32 parameter slices, with its
// moments and step count in the open so that a checkpoint can save them
// (gorgonia's AdamSolver keeps both unexported). It computes exactly what
// gorgonia v0.9.18's AdamSolver computes for float32 tensors (default
// eps 1e-8, beta1 0.9, beta2 0.999, no clipping or regularization), in
// the same float32 operations and order:
//
//	m = beta1*m + (1-beta1)*g
//	v = beta2*v + (1-beta2)*g*g
//	w += (-lr * m/(1-beta1^t)) / (sqrt(v/(1-beta2^t)) + eps)
//
// and zeroes the gradients; internal/adamstep runs that loop, eight
// lanes at a time where it can, to the same bits. Not safe for concurrent
// use.
type adam struct {
	lr, beta1, beta2, eps float64
	t                     int64
	m, v                  [][]float32
}

// newAdam returns Adam with zero moments for parameters of the given
// sizes.
func newAdam(lr float64, sizes []int) *adam {
	o := &adam{lr: lr, beta1: 0.9, beta2: 0.999, eps: 1e-8}
	for _, n := range sizes {
		o.m = append(o.m, make([]float32, n))
		o.v = append(o.v, make([]float32, n))
	}
	return o
}

// step updates every ws[i] from its gradient gs[i] (same sizes as at
// newAdam) and zeroes the gradients.
func (o *adam) step(ws, gs [][]float32) {
	o.t++
	b1, b2 := float32(o.beta1), float32(o.beta2)
	c := adamstep.Coeffs{
		Beta1: b1, Beta2: b2, OneMinusBeta1: float32(1) - b1, OneMinusBeta2: float32(1) - b2,
		C1:  float32(1) / float32(1-math.Pow(o.beta1, float64(o.t))),
		C2:  float32(1) / float32(1-math.Pow(o.beta2, float64(o.t))),
		Eps: float32(o.eps), NegLR: -float32(o.lr),
	}
	for i, w := range ws {
		adamstep.Step(w, gs[i], o.m[i], o.v[i], &c)
	}
}
