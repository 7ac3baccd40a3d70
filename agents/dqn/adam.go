package dqn

import "math"

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
// and zeroes the gradients. Not safe for concurrent use.
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
	c1 := float32(1) / float32(1-math.Pow(o.beta1, float64(o.t)))
	c2 := float32(1) / float32(1-math.Pow(o.beta2, float64(o.t)))
	b1, b2 := float32(o.beta1), float32(o.beta2)
	omb1, omb2 := float32(1)-b1, float32(1)-b2
	eps, negLR := float32(o.eps), -float32(o.lr)
	for i, w := range ws {
		g, m, v := gs[i], o.m[i], o.v[i]
		for j := range w {
			// Explicit conversions keep every product rounded to
			// float32 (no fused multiply-add), as gorgonia's loops.
			t1 := float32(g[j] * omb1)
			g2 := float32(float32(g[j]*g[j]) * omb2)
			m[j] = float32(m[j]*b1) + t1
			v[j] = float32(v[j]*b2) + g2
			mh := float32(float32(m[j]*c1) * negLR)
			vh := float32(float32(math.Sqrt(float64(float32(v[j]*c2)))) + eps)
			w[j] += mh / vh
			g[j] = 0
		}
	}
}
