//go:build trajring_cuda

package gpu

import (
	"fmt"
	"math"

	"github.com/trajring/trajring/kernels"
	"gorgonia.org/tensor"
)

// The learner's fused launches: several products of a training step in
// one launch, each element computed by the same tile code as Gemm's, so
// every sum keeps its order and the results equal the separate launches'
// bit for bit (kernels/host TestGemm3MatchesReference,
// TestGemmBackIsTheSeparateLaunches).

// GemmProduct is one product of Gemm3: C = op(A)·op(B) (+ C), then Ep.
type GemmProduct struct {
	A, B, C *tensor.Dense
	Ep      GemmEpilogue
}

// Gemm3 computes one to three products of one shape (op(A) m×k, op(B)
// k×n, C m×n, the same transA, transB and acc) and one kind of epilogue
// (every product's Ep has a bias, with the same ReLU, or every one the
// ReLU gradient, or none has either) in one launch of 16×16 tiles
// (kernels/gemm3.cu): the learner's forward passes of a layer on s and s'
// with the online and target weights. Reference loop, for each product p
// of ps (each element bit for bit what Gemm with the same epilogue
// writes):
//
//	for i := range m {
//		for j := range n {
//			s := float32(0)
//			if acc {
//				s = C[p][i*n+j]
//			}
//			for l := range k {
//				s = s + float32(opA[p](i, l)*opB[p](l, j))
//			}
//			if bias[p] != nil {
//				s = s + bias[p][j]
//				if relu && s < 0 {
//					s = 0
//				}
//			}
//			if reluGradOf[p] != nil && !(reluGradOf[p][i*n+j] > 0) {
//				s = 0
//			}
//			C[p][i*n+j] = s
//		}
//	}
//
// No output may overlap an input of any product or another output. An
// empty C launches nothing. It is safe for concurrent use.
func (b *Backend) Gemm3(transA, transB, acc bool, m, n, k int, ps ...GemmProduct) error {
	if err := b.enterLaunch(); err != nil {
		return err
	}
	defer b.exit()
	if err := dims(m, n, k); err != nil {
		return fmt.Errorf("gemm3 %dx%dx%d: %w", m, n, k, err)
	}
	if len(ps) < 1 || len(ps) > 3 {
		return fmt.Errorf("%w: gemm3 of %d products (1 to 3)", ErrBounds, len(ps))
	}
	ep0 := ps[0].Ep
	var ins, outs []operand
	var names []string
	args := make([]uint64, 0, kernels.Gemm3.Args)
	for i, p := range ps {
		if (p.Ep.Bias != nil) != (ep0.Bias != nil) || p.Ep.ReLU != ep0.ReLU || (p.Ep.ReLUGradOf != nil) != (ep0.ReLUGradOf != nil) {
			return fmt.Errorf("%w: gemm3: product %d's epilogue is not product 0's kind", ErrBounds, i)
		}
		if p.Ep.ReLU && p.Ep.Bias == nil {
			return fmt.Errorf("%w: gemm3: a ReLU epilogue needs a bias", ErrBounds)
		}
		if p.Ep.Bias != nil && p.Ep.ReLUGradOf != nil {
			return fmt.Errorf("%w: gemm3: a bias and a ReLU gradient in one product", ErrBounds)
		}
		pa, err := b.operand("gemm3 a", p.A, tensor.Float32, int64(m)*int64(k))
		if err != nil {
			return err
		}
		pb, err := b.operand("gemm3 b", p.B, tensor.Float32, int64(k)*int64(n))
		if err != nil {
			return err
		}
		pc, err := b.operand("gemm3 c", p.C, tensor.Float32, int64(m)*int64(n))
		if err != nil {
			return err
		}
		var pe operand
		switch {
		case p.Ep.Bias != nil:
			pe, err = b.operand("gemm3 bias", p.Ep.Bias, tensor.Float32, int64(n))
		case p.Ep.ReLUGradOf != nil:
			pe, err = b.operand("gemm3 relu gradient y", p.Ep.ReLUGradOf, tensor.Float32, int64(m)*int64(n))
		}
		if err != nil {
			return err
		}
		ins = append(ins, pa, pb, pe)
		outs = append(outs, pc)
		names = append(names, fmt.Sprintf("c of product %d", i))
		args = append(args, pa.addr, pb.addr, pc.addr, pe.addr)
	}
	if err := disjoint(outs, names, ins); err != nil {
		return err
	}
	if m == 0 || n == 0 {
		return nil
	}
	for len(args) < 12 {
		args = append(args, 0, 0, 0, 0) // no product: c null
	}
	flags := uint64(0)
	if ep0.Bias != nil {
		flags |= 8
		if ep0.ReLU {
			flags |= 16
		}
	}
	if ep0.ReLUGradOf != nil {
		flags |= 32
	}
	if transA {
		flags |= 1
	}
	if transB {
		flags |= 2
	}
	if acc {
		flags |= 4
	}
	tiles := int64((m+15)/16) * int64((n+15)/16) * int64(len(ps))
	args = append(args, uint64(m), uint64(n), uint64(k), flags)
	return b.launchGrid(kernels.Gemm3, tiles*gemmThreads, 1, 1, args...)
}

// GemmBackArgs are the operands of GemmBack, device tensors of the
// backend, row-major. It is a plain value.
type GemmBackArgs struct {
	// Batch rows, In inputs and Out outputs of the layer.
	Batch, In, Out int
	// X [Batch, In] is the layer's input, DZ [Batch, Out] the gradient
	// of the loss with respect to its output before its activation, W
	// [In, Out] its weights.
	X, DZ, W *tensor.Dense
	// Outputs: GW [In, Out] and GB [Out], the gradients of the weights
	// and the bias, and, unless nil, DX [Batch, In], the gradient with
	// respect to X, zeroed where !(Y > 0) unless Y [Batch, In], the
	// output of the ReLU below, is nil.
	GW, GB, DX *tensor.Dense
	Y          *tensor.Dense
	// With NormState not nil, after the products the launch's last block
	// writes the global norm of the float32 gradient G [N] (which may
	// hold GW and GB: it is read after them) and its clipping factor to
	// MaxNorm into NormState (uint64 [NormStateWords(Parts)]: a counter,
	// the norm, the factor, Parts partial sums; see GradNorm), the
	// counter zero before and after: zero it once when allocating it.
	G         *tensor.Dense
	N, Parts  int
	NormState *tensor.Dense
	MaxNorm   float64
}

// NormStateWords is the length of GemmBack's NormState, uint64 words, for
// parts partial sums; the norm (float64) is its word 1, the clipping
// factor (float32) the first 4 bytes of word 2, the partial sums words 3
// on.
func NormStateWords(parts int) int { return 3 + parts }

// GemmBack computes one dense layer's gradients in one launch
// (kernels/gemm_back.cu) and, optionally, the global gradient norm after
// them, bit for bit what Gemm, ColSum, GemmEp and GradNorm write in five
// launches of their own. Reference loop (every product and sum rounded
// on its own, as Gemm's):
//
//	for i := range In { // GW = X^T·DZ
//		for j := range Out {
//			s := float32(0)
//			for l := range Batch {
//				s = s + float32(X[l*In+i]*DZ[l*Out+j])
//			}
//			GW[i*Out+j] = s
//		}
//	}
//	for j := range Out { // GB = column sums of DZ (ColSum's)
//		s := float32(0)
//		for l := range Batch {
//			s = s + DZ[l*Out+j]
//		}
//		GB[j] = s
//	}
//	for i := range Batch { // DX = DZ·W^T through the ReLU (if DX != nil)
//		for j := range In {
//			s := float32(0)
//			for l := range Out {
//				s = s + float32(DZ[i*Out+l]*W[j*Out+l])
//			}
//			if Y != nil && !(Y[i*In+j] > 0) {
//				s = 0
//			}
//			DX[i*In+j] = s
//		}
//	}
//	if NormState != nil { // GradNorm's loops over G, into NormState
//		partial[p], norm, scale = ...
//	}
//
// (kernels/host.RefGemmBack and RefGradNorm). The last block is the one
// whose ticket (an atomic count of finished blocks, after a fence) is the
// last; it computes every partial sum and adds them in order, so the norm
// does not depend on which block that is or on the grid. No output may
// overlap an input or another output (G may hold GW and GB, not DX or
// NormState); Parts must be at least 1 and MaxNorm not NaN with a norm.
// It is safe for concurrent use.
func (b *Backend) GemmBack(a GemmBackArgs) error {
	if err := b.enterLaunch(); err != nil {
		return err
	}
	defer b.exit()
	B, K, N := a.Batch, a.In, a.Out
	if err := dims(B, K, N); err != nil {
		return fmt.Errorf("gemm back %dx%dx%d: %w", B, K, N, err)
	}
	var err error
	var px, pdz, pw, py, pgw, pgb, pdx, pg, pst operand
	for _, s := range []struct {
		name string
		t    *tensor.Dense
		n    int64
		dst  *operand
		opt  bool
	}{
		{"X", a.X, int64(B) * int64(K), &px, false}, {"DZ", a.DZ, int64(B) * int64(N), &pdz, false},
		{"W", a.W, int64(K) * int64(N), &pw, a.DX == nil}, {"Y", a.Y, int64(B) * int64(K), &py, true},
		{"GW", a.GW, int64(K) * int64(N), &pgw, false}, {"GB", a.GB, int64(N), &pgb, false},
		{"DX", a.DX, int64(B) * int64(K), &pdx, true},
	} {
		if s.t == nil && s.opt {
			continue
		}
		if *s.dst, err = b.operand("gemm back "+s.name, s.t, tensor.Float32, s.n); err != nil {
			return err
		}
	}
	if a.DX == nil && a.Y != nil {
		return fmt.Errorf("%w: gemm back: Y without DX", ErrBounds)
	}
	if a.NormState != nil {
		if err := dims(a.N, a.Parts); err != nil || a.Parts < 1 || math.IsNaN(a.MaxNorm) {
			return fmt.Errorf("%w: gemm back: norm of %d values in %d parts, clipped to %v", ErrBounds, a.N, a.Parts, a.MaxNorm)
		}
		if pg, err = b.operand("gemm back G", a.G, tensor.Float32, int64(a.N)); err != nil {
			return err
		}
		if pst, err = b.operand("gemm back norm state", a.NormState, tensor.Uint64, int64(NormStateWords(a.Parts))); err != nil {
			return err
		}
	}
	if err := disjoint([]operand{pgw, pgb, pdx, pst}, []string{"GW", "GB", "DX", "norm state"}, []operand{px, pdz, pw, py}); err != nil {
		return err
	}
	if err := disjoint([]operand{pdx, pst}, []string{"DX", "norm state"}, []operand{pg}); err != nil {
		return err
	}
	tiles := int64((K+15)/16)*int64((N+15)/16) + int64((N+15)/16)
	if a.DX != nil {
		tiles += int64((B+15)/16) * int64((K+15)/16)
	}
	if tiles == 0 && a.NormState == nil {
		return nil
	}
	tiles = max(tiles, 1)
	return b.launchGrid(kernels.GemmBack, tiles*gemmThreads, 1, 1, px.addr, pdz.addr, pw.addr, py.addr, pgw.addr, pgb.addr, pdx.addr,
		uint64(B), uint64(K), uint64(N), pg.addr, uint64(a.N), uint64(a.Parts), pst.addr, math.Float64bits(a.MaxNorm))
}
