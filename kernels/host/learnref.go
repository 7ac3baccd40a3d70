//go:build cgo

package host

import "math"

// The reference loops of the learner kernels (gemm.h, mlp.h, td_loss.h,
// grad_norm.h, adam.h), in plain Go, for the tests of their host build
// here and of their gpu wrappers. Each float operation is converted
// explicitly, so that no Go compiler fuses a product into the sum it
// feeds. They are pure functions over slices, safe for concurrent use
// on disjoint memory.

// Gemm flags, as gemm.h's TR_GEMM_*.
const (
	GemmTransA = 1 // A is stored k×m
	GemmTransB = 2 // B is stored n×k
	GemmAcc    = 4 // C += op(A)·op(B)
	// Epilogues on each finished element of C: + bias[j] (GemmBias),
	// then negative results set to 0 (GemmReLU); or set to 0 where
	// !(y[i,j] > 0) (GemmDReLU, the ReLU gradient).
	GemmBias  = 8
	GemmReLU  = 16
	GemmDReLU = 32
)

// RefGemm is trajring_gemm: C = op(A)·op(B), or C += op(A)·op(B) with
// GemmAcc, row-major, op(A) m×k, op(B) k×n, each product and sum rounded
// to float32 in order of k.
func RefGemm(a, b, c []float32, m, n, k int, flags int) {
	RefGemmEpilogue(a, b, c, m, n, k, flags, nil, nil)
}

// RefGemmEpilogue is trajring_gemm with its epilogues: RefGemm, then
// RefBiasReLU's add and ReLU (GemmBias, GemmReLU; bias [n]) or
// RefReLUGrad's mask (GemmDReLU; y [m, n]) on each element.
func RefGemmEpilogue(a, b, c []float32, m, n, k int, flags int, bias, y []float32) {
	for i := range m {
		for j := range n {
			s := float32(0)
			if flags&GemmAcc != 0 {
				s = c[i*n+j]
			}
			for l := range k {
				av := a[i*k+l]
				if flags&GemmTransA != 0 {
					av = a[l*m+i]
				}
				bv := b[l*n+j]
				if flags&GemmTransB != 0 {
					bv = b[j*k+l]
				}
				s = s + float32(av*bv)
			}
			if flags&GemmBias != 0 {
				s = s + bias[j]
				if flags&GemmReLU != 0 && s < 0 {
					s = 0
				}
			}
			if flags&GemmDReLU != 0 && !(y[i*n+j] > 0) {
				s = 0
			}
			c[i*n+j] = s
		}
	}
}

// GemmOnes is gemm.h's TR_GEMM_ONES: op(A) is all ones (A not read).
const GemmOnes = 64

// RefGemm3 is trajring_gemm3: RefGemmEpilogue for each product p whose
// c[p] is not nil, all of shape m×n×k with flags; e[p] is the bias with
// GemmBias, else the ReLU gradient's y.
func RefGemm3(a, b, c, e [3][]float32, m, n, k int, flags int) {
	for p := range 3 {
		if c[p] == nil {
			continue
		}
		if flags&GemmBias != 0 {
			RefGemmEpilogue(a[p], b[p], c[p], m, n, k, flags, e[p], nil)
		} else {
			RefGemmEpilogue(a[p], b[p], c[p], m, n, k, flags, nil, e[p])
		}
	}
}

// RefGemmBack is trajring_gemm_back's products for a layer of k inputs
// and n outputs on bsz rows: gw = x^T·dz [k, n], gb = the column sums of
// dz [n] (RefColSum), and, unless dx is nil, dx = dz·w^T [bsz, k] zeroed
// where !(y > 0) unless y is nil. Its norm is RefGradNorm's.
func RefGemmBack(x, dz, w, y, gw, gb, dx []float32, bsz, k, n int) {
	RefGemm(x, dz, gw, k, n, bsz, GemmTransA)
	RefColSum(dz, gb, bsz, n)
	if dx != nil {
		flags := GemmTransB
		if y != nil {
			flags |= GemmDReLU
		}
		RefGemmEpilogue(dz, w, dx, bsz, k, n, flags, nil, y)
	}
}

// RefBiasReLU is trajring_bias_relu: z[i,j] += bias[j], then negative
// values set to 0 when relu is set.
func RefBiasReLU(z, bias []float32, rows, cols int, relu bool) {
	for i := range rows {
		for j := range cols {
			v := z[i*cols+j] + bias[j]
			if relu && v < 0 {
				v = 0
			}
			z[i*cols+j] = v
		}
	}
}

// RefReLUGrad is trajring_relu_grad: dy[i] = 0 where y[i] is not
// positive.
func RefReLUGrad(dy, y []float32) {
	for i := range dy {
		if !(y[i] > 0) {
			dy[i] = 0
		}
	}
}

// RefColSum is trajring_col_sum: out[j] = the sum of column j of x [rows,
// cols], in row order.
func RefColSum(x, out []float32, rows, cols int) {
	for j := range cols {
		s := float32(0)
		for i := range rows {
			s = s + x[i*cols+j]
		}
		out[j] = s
	}
}

// RefTDLoss is trajring_td_loss (see td_loss.h): qno nil values the next
// action chosen by qnt; valid nil means every transition is valid.
func RefTDLoss(q, qno, qnt []float32, act []int64, rew, disc []float32, w []float64, valid []uint8, bsz, na int, eps float64,
	dq, td, prio, rowLoss []float32) {
	for i := range bsz {
		wi := float32(0)
		if valid == nil || valid[i] != 0 {
			wi = float32(w[i])
		}
		clear(dq[i*na : (i+1)*na])
		a := act[i]
		if a < 0 || a >= int64(na) {
			td[i], prio[i], rowLoss[i] = 0, 0, 0
			continue
		}
		sel := qno
		if sel == nil {
			sel = qnt
		}
		best := 0
		for j := 1; j < na; j++ {
			if sel[i*na+j] > sel[i*na+best] {
				best = j
			}
		}
		y := rew[i] + float32(disc[i]*qnt[i*na+best])
		d := q[i*na+int(a)] - y
		abs := d
		if d < 0 {
			abs = -d
		}
		r := abs - 1
		if !(r > 0) {
			r = 0
		}
		c := abs - r
		rowLoss[i] = float32(float32(float32(c*c)*0.5)+r) * wi
		g := d
		if d > 1 {
			g = 1
		} else if d < -1 {
			g = -1
		}
		dq[i*na+int(a)] = float32(wi*g) / float32(bsz)
		td[i] = d
		prio[i] = 0
		if wi != 0 {
			ad := float64(d)
			if d < 0 {
				ad = -ad
			}
			prio[i] = float32(ad + eps)
		}
	}
}

// RefGradNorm is trajring_norm_partial followed by trajring_norm_finish:
// the norm of g from parts strided partial sums of squares in float64,
// and the clipping factor to maxNorm (1 when the norm does not exceed it).
func RefGradNorm(g []float32, parts int, maxNorm float64) (norm float64, scale float32) {
	partial := make([]float64, parts)
	for p := range parts {
		s := 0.0
		for i := p; i < len(g); i += parts {
			v := float64(g[i])
			s = s + float64(v*v)
		}
		partial[p] = s
	}
	t := 0.0
	for _, s := range partial {
		t = t + s
	}
	norm, scale = math.Sqrt(t), 1
	if norm > maxNorm {
		scale = float32(maxNorm / float64(norm+1e-6))
	}
	return norm, scale
}

// AdamConsts are trajring_adam's float32 constants for step t (from 1) of
// Adam with learning rate lr, betas 0.9 and 0.999 and epsilon 1e-8,
// computed as agents/dqn's adam computes them.
type AdamConsts struct {
	B1, B2, OmB1, OmB2, Eps, NegLR, C1, C2 float32
}

// NewAdamConsts returns the constants of step t of Adam with rate lr.
func NewAdamConsts(lr float64, t int64) AdamConsts {
	const beta1, beta2, eps = 0.9, 0.999, 1e-8
	b1, b2 := float32(beta1), float32(beta2)
	return AdamConsts{
		B1: b1, B2: b2, OmB1: 1 - b1, OmB2: 1 - b2, Eps: float32(eps), NegLR: -float32(lr),
		C1: float32(1) / float32(1-math.Pow(beta1, float64(t))),
		C2: float32(1) / float32(1-math.Pow(beta2, float64(t))),
	}
}

// RefAdam is trajring_adam: one Adam step of w from g (times scale[0]
// when scale is not nil) with moments m and v.
func RefAdam(w, g, m, v []float32, scale []float32, k AdamConsts) {
	for j := range w {
		gj := g[j]
		if scale != nil {
			gj = gj * scale[0]
		}
		t1 := gj * k.OmB1
		g2 := float32(gj*gj) * k.OmB2
		m[j] = float32(m[j]*k.B1) + t1
		v[j] = float32(v[j]*k.B2) + g2
		mh := float32(m[j]*k.C1) * k.NegLR
		vh := float32(math.Sqrt(float64(float32(v[j]*k.C2)))) + k.Eps
		w[j] = w[j] + mh/vh
	}
}

// RefArgmax is trajring_argmax: out[i] = the index of the first largest
// element of row i of x [rows, cols].
func RefArgmax(x []float32, out []int64, rows, cols int) {
	for i := range rows {
		best := 0
		for j := 1; j < cols; j++ {
			if x[i*cols+j] > x[i*cols+best] {
				best = j
			}
		}
		out[i] = int64(best)
	}
}
