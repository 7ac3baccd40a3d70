// Package adamstep is the elementwise update of Adam (Kingma and Ba) over
// float32 slices, eight lanes at a time with AVX on amd64 (sixteen with
// AVX-512). Every lane
// computes exactly what the scalar loop computes: each product, sum,
// quotient and square root rounded to float32 on its own (no fused
// multiply-add, and the square root of a float32 is correctly rounded
// either way), so the vector loop and the Go loop give the same bits.
package adamstep

// Coeffs are one step's constants: Beta1, Beta2 and their complements
// OneMinusBeta1 and OneMinusBeta2 (passed rounded, not recomputed, so the
// caller chooses the rounding), the bias corrections C1 = 1/(1-beta1^t)
// and C2 = 1/(1-beta2^t), Eps and NegLR = -learning rate. A plain value,
// safe for concurrent reads.
type Coeffs struct {
	Beta1, Beta2, OneMinusBeta1, OneMinusBeta2, C1, C2, Eps, NegLR float32
}

// Step updates n = len(w) parameters from their gradients g and moments
// m, v (each at least n long):
//
//	m = beta1*m + (1-beta1)*g
//	v = beta2*v + (1-beta2)*(g*g)
//	w += ((m*c1)*negLR) / (sqrt(v*c2) + eps)
//
// and sets g to 0. It panics if a slice is shorter than w (an internal
// package: the caller sizes them). Safe for concurrent use on distinct
// slices.
func Step(w, g, m, v []float32, c *Coeffs) {
	n := len(w)
	g, m, v = g[:n], m[:n], v[:n]
	done := vector(w, g, m, v, c)
	scalar(w[done:], g[done:], m[done:], v[done:], c)
}

// scalar is Step in Go, element by element.
func scalar(w, g, m, v []float32, c *Coeffs) {
	g, m, v = g[:len(w)], m[:len(w)], v[:len(w)]
	for j := range w {
		// Explicit conversions keep every product rounded to float32
		// (no fused multiply-add on platforms that have one).
		t1 := float32(g[j] * c.OneMinusBeta1)
		g2 := float32(float32(g[j]*g[j]) * c.OneMinusBeta2)
		m[j] = float32(m[j]*c.Beta1) + t1
		v[j] = float32(v[j]*c.Beta2) + g2
		mh := float32(float32(m[j]*c.C1) * c.NegLR)
		vh := float32(sqrt32(float32(v[j]*c.C2)) + c.Eps)
		w[j] += mh / vh
		g[j] = 0
	}
}
