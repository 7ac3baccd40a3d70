//go:build trajring_cuda

package gpu

import (
	"encoding/binary"
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

// TDHeadArgs are the operands of a TDHead that stay from step to step: a
// DQN learner's device tensors of the backend, row-major. It is a plain
// value.
type TDHeadArgs struct {
	// Batch transitions, In inputs of the last layer, NumActions outputs.
	Batch, In, NumActions int
	// X, XNext and XTarget [Batch, In] are the last layer's inputs: the
	// online network's on s and s' (XNext nil: plain DQN, the next action
	// picked by the target network) and the target network's on s'.
	X, XNext, XTarget *tensor.Dense
	// W [In, NumActions] and Bias [NumActions] are the online network's
	// last layer, WTarget and BiasTarget the target network's.
	W, Bias, WTarget, BiasTarget *tensor.Dense
	// Outputs: Q, QNextOnline (nil with XNext) and QNextTarget [Batch,
	// NumActions], then TDLoss's DQ [Batch, NumActions], TD, Priorities
	// and RowLoss [Batch].
	Q, QNextOnline, QNextTarget, DQ, TD, Priorities, RowLoss *tensor.Dense
	// PriorityEpsilon is TDLoss's.
	PriorityEpsilon float64
}

// TDHead is a DQN learner's last layer and TD loss as one launch
// (kernels/td_head.cu): a descriptor of its operands in device memory,
// written once by NewTDHead, and Step, which launches on a batch. Close
// frees it. It is safe for concurrent use as its Backend is, but one
// TDHead's Steps must not overlap on the device (its count of finished
// blocks is shared): the backend's one stream orders them.
type TDHead struct {
	b    *Backend
	a    kernels.Arena
	args TDHeadArgs
}

// tdHeadWords is the descriptor's length (TR_TDH_WORDS).
const tdHeadWords = 19

// words checks a's operands (as Gemm3 and TDLoss check theirs) and
// returns the descriptor (host/td_loss.h, TR_TDH_*), its count 0. It
// runs with the backend entered.
func (b *Backend) tdHeadWords(a TDHeadArgs) ([]uint64, []operand, error) {
	B, K, NA := int64(a.Batch), int64(a.In), int64(a.NumActions)
	if err := dims(a.Batch, a.In, a.NumActions); err != nil || a.NumActions < 1 || a.Batch < 1 {
		return nil, nil, fmt.Errorf("%w: TD head of %d transitions, %d inputs, %d actions", ErrBounds, a.Batch, a.In, a.NumActions)
	}
	if !(a.PriorityEpsilon >= 0) || math.IsInf(a.PriorityEpsilon, 1) {
		return nil, nil, fmt.Errorf("%w: priority epsilon %v", ErrBounds, a.PriorityEpsilon)
	}
	if (a.XNext == nil) != (a.QNextOnline == nil) {
		return nil, nil, fmt.Errorf("%w: TD head: XNext and QNextOnline go together", ErrBounds)
	}
	w := make([]uint64, tdHeadWords)
	var ops [14]operand
	for i, s := range []struct {
		name string
		t    *tensor.Dense
		n    int64
	}{
		{"X", a.X, B * K}, {"XNext", a.XNext, B * K}, {"XTarget", a.XTarget, B * K}, {"W", a.W, K * NA}, {"Bias", a.Bias, NA},
		{"WTarget", a.WTarget, K * NA}, {"BiasTarget", a.BiasTarget, NA}, {"Q", a.Q, B * NA}, {"QNextOnline", a.QNextOnline, B * NA},
		{"QNextTarget", a.QNextTarget, B * NA}, {"DQ", a.DQ, B * NA}, {"TD", a.TD, B}, {"Priorities", a.Priorities, B},
		{"RowLoss", a.RowLoss, B},
	} {
		if s.t == nil && (s.name == "XNext" || s.name == "QNextOnline") {
			continue
		}
		var err error
		if ops[i], err = b.operand("TD head "+s.name, s.t, tensor.Float32, s.n); err != nil {
			return nil, nil, err
		}
		w[i] = ops[i].addr
	}
	if err := disjoint(ops[7:], []string{"Q", "QNextOnline", "QNextTarget", "DQ", "TD", "Priorities", "RowLoss"}, ops[:7]); err != nil {
		return nil, nil, err
	}
	w[14], w[15], w[16], w[17] = uint64(B), uint64(K), uint64(NA), math.Float64bits(a.PriorityEpsilon)
	return w, ops[7:], nil
}

// NewTDHead checks a's operands and writes the descriptor of a TDHead
// into new device memory of b. Bad operands return ErrBounds (ErrArena
// for memory that is not b's) and allocate nothing.
func (b *Backend) NewTDHead(a TDHeadArgs) (*TDHead, error) {
	if err := b.enterLaunch(); err != nil {
		return nil, err
	}
	w, _, err := b.tdHeadWords(a)
	b.exit()
	if err != nil {
		return nil, err
	}
	ar, err := b.Alloc(8 * tdHeadWords)
	if err != nil {
		return nil, err
	}
	raw := make([]byte, 8*tdHeadWords)
	for i, v := range w {
		binary.LittleEndian.PutUint64(raw[8*i:], v)
	}
	if err := b.Upload(ar, 0, raw); err != nil {
		_ = b.Free(ar)
		return nil, err
	}
	return &TDHead{b: b, a: ar, args: a}, nil
}

// Close frees the descriptor; the TDHead is unusable afterwards.
func (h *TDHead) Close() error {
	if h.a == nil {
		return nil
	}
	err := h.b.Free(h.a)
	h.a = nil
	return err
}

// Step queues, in one launch, the last layer on s and s' and the TD loss
// of a batch: Q = X·W + Bias, QNextOnline = XNext·W + Bias (with XNext),
// QNextTarget = XTarget·WTarget + BiasTarget, each element Gemm3's with a
// bias epilogue, then TDLoss on them with the batch's Actions (int64),
// Reward, Discount (float32), Weights (float64) and Valid (uint8 or bool;
// nil: all valid), bit for bit what Gemm3 and TDLoss write in two
// launches. Reference loop:
//
//	for i := range Batch { // Q, and likewise QNextOnline and QNextTarget
//		for j := range NumActions {
//			s := float32(0)
//			for l := range In {
//				s = s + float32(X[i*In+l]*W[l*NumActions+j])
//			}
//			Q[i*NumActions+j] = s + Bias[j]
//		}
//	}
//	// then TDLoss's loop (kernels/host.RefTDLoss) on Q, QNextOnline, QNextTarget
//
// The TD loss runs in the launch's last block to finish (a ticket after
// a fence), which reads the Q-values the others wrote. The operands are
// checked again (the tensors must still be live); the batch's must not
// overlap the outputs. It is safe for concurrent use.
func (h *TDHead) Step(actions, reward, discount, weights, valid *tensor.Dense) error {
	b := h.b
	if err := b.enterLaunch(); err != nil {
		return err
	}
	defer b.exit()
	if h.a == nil {
		return fmt.Errorf("%w: TD head closed", ErrBounds)
	}
	d, err := b.arena(h.a)
	if err != nil {
		return fmt.Errorf("TD head descriptor: %w", err)
	}
	_, outs, err := b.tdHeadWords(h.args)
	if err != nil {
		return err
	}
	B := int64(h.args.Batch)
	vt := tensor.Uint8
	if valid != nil && valid.Dtype() == tensor.Bool {
		vt = tensor.Bool
	}
	var ins [5]operand
	for i, s := range []struct {
		name string
		t    *tensor.Dense
		dt   tensor.Dtype
	}{{"Actions", actions, tensor.Int64}, {"Reward", reward, tensor.Float32}, {"Discount", discount, tensor.Float32},
		{"Weights", weights, tensor.Float64}, {"Valid", valid, vt}} {
		if s.t == nil && s.name == "Valid" {
			continue
		}
		if ins[i], err = b.operand("TD head "+s.name, s.t, s.dt, B); err != nil {
			return err
		}
	}
	if err := disjoint(outs, []string{"Q", "QNextOnline", "QNextTarget", "DQ", "TD", "Priorities", "RowLoss"}, ins[:]); err != nil {
		return err
	}
	products := int64(2)
	if h.args.XNext != nil {
		products = 3
	}
	tiles := (B + 15) / 16 * int64((h.args.NumActions+15)/16) * products
	return b.launchGrid(kernels.TDHead, tiles*gemmThreads, 1, 1, uint64(d.ptr), ins[0].addr, ins[1].addr, ins[2].addr, ins[3].addr, ins[4].addr)
}
