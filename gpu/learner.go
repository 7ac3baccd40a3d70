//go:build trajring_cuda

package gpu

import (
	"fmt"
	"math"

	"github.com/trajring/trajring/kernels"
	"gorgonia.org/tensor"
)

// The learner's operations: GEMM, bias and ReLU, their gradients, the
// double-DQN TD loss, the global gradient norm and Adam, on float32
// device tensors of the backend (kernels/host/{gemm,mlp,td_loss,
// grad_norm,adam}.h). Each checks its operands on the host (device
// tensors of this backend, of the right dtype, holding enough elements
// within one live arena; outputs not overlapping inputs), returns an
// error wrapping ErrBounds (ErrArena for memory that is not this
// backend's) and queues nothing when one is wrong, and otherwise queues
// its launches on the backend's stream and returns without waiting: work
// queued before reads its inputs' final bytes, and work queued after sees
// its outputs. Nothing is copied between host and device. The results
// equal the reference loops in the doc comments (kernels/host.Ref*) bit
// for bit on the device and in the stand-in. All are safe for concurrent
// use (calls are serialised on the backend).

// gemmThreads is the block size trajring_gemm needs (TR_GEMM_THREADS):
// the backend's block size, which the constant expression below pins.
const gemmThreads = 256

const _ = uint(blockSize-gemmThreads) + uint(gemmThreads-blockSize)

// operand is a checked device tensor: its address and extent.
type operand struct {
	addr uint64
	n    int64 // bytes
}

// operand checks that t is a device tensor of this backend of dtype dt,
// at an address aligned to its elements, whose first count elements lie
// in one live arena, and returns them. It runs with the backend entered.
func (b *Backend) operand(what string, t *tensor.Dense, dt tensor.Dtype, count int64) (operand, error) {
	if t == nil {
		return operand{}, fmt.Errorf("%w: %s: no tensor", ErrBounds, what)
	}
	if t.Dtype() != dt {
		return operand{}, fmt.Errorf("%w: %s: dtype %v, want %v", ErrBounds, what, t.Dtype(), dt)
	}
	size := int64(dt.Size())
	bytes, ok := kernels.Mul(count, size)
	if !ok || int64(t.Shape().TotalSize()) < count {
		return operand{}, fmt.Errorf("%w: %s: %d elements, %d needed", ErrBounds, what, t.Shape().TotalSize(), count)
	}
	_, p, err := b.source(t, bytes)
	if err != nil {
		return operand{}, fmt.Errorf("%s: %w", what, err)
	}
	if p%uint64(size) != 0 {
		// The kernel's typed loads would fault on a GPU with the sticky
		// CUDA_ERROR_MISALIGNED_ADDRESS, losing the context.
		return operand{}, fmt.Errorf("%w: %s: device address %#x is not a multiple of its %d-byte elements", ErrBounds, what, p, size)
	}
	return operand{addr: p, n: bytes}, nil
}

// overlap reports whether two operands share a byte.
func overlap(x, y operand) bool {
	return x.n > 0 && y.n > 0 && x.addr < y.addr+uint64(y.n) && y.addr < x.addr+uint64(x.n)
}

// disjoint checks that no output overlaps an input or another output.
func disjoint(outs []operand, names []string, ins []operand) error {
	for i, o := range outs {
		for _, in := range ins {
			if overlap(o, in) {
				return fmt.Errorf("%w: output %s overlaps an input", ErrBounds, names[i])
			}
		}
		for j := range i {
			if overlap(o, outs[j]) {
				return fmt.Errorf("%w: outputs %s and %s overlap", ErrBounds, names[j], names[i])
			}
		}
	}
	return nil
}

// dims checks that every dimension lies in [0, 2^31).
func dims(ds ...int) error {
	for _, d := range ds {
		if d < 0 || int64(d) > math.MaxInt32 {
			return fmt.Errorf("%w: dimension %d", ErrBounds, d)
		}
	}
	return nil
}

// Gemm computes c = op(a)·op(bm), or c += op(a)·op(bm) with acc, on
// row-major float32 matrices: op(a) is m×k (a stored m×k, or k×m with
// transA), op(bm) k×n (bm stored k×n, or n×k with transB) and c m×n, in
// one launch of 16×16 tiles (kernels/gemm.cu). Reference loop:
//
//	for i := range m {
//		for j := range n {
//			s := float32(0)
//			if acc {
//				s = c[i*n+j]
//			}
//			for l := range k {
//				s = s + float32(opA(i, l)*opB(l, j))
//			}
//			c[i*n+j] = s
//		}
//	}
//
// Each product and sum is rounded on its own, in order of l, as gonum's
// float32 Gemm adds without transposes. c must not overlap a or bm. An
// empty c launches nothing. It is safe for concurrent use.
func (b *Backend) Gemm(transA, transB, acc bool, m, n, k int, a, bm, c *tensor.Dense) error {
	return b.GemmEp(transA, transB, acc, m, n, k, a, bm, c, GemmEpilogue{})
}

// GemmEpilogue is the work GemmEp does on each element of c once its sum
// is final, bit for bit what the separate launch would do after Gemm.
type GemmEpilogue struct {
	// Bias, float32 [n], is added to column j (BiasReLU's add), then
	// with ReLU negative results are set to 0. nil: no bias (and ReLU
	// must be false).
	Bias *tensor.Dense
	ReLU bool
	// ReLUGradOf, float32 [m, n], sets c[i,j] to 0 where
	// !(ReLUGradOf[i,j] > 0) (ReLUGrad with y = ReLUGradOf), after the
	// bias. nil: none.
	ReLUGradOf *tensor.Dense
}

// GemmEp is Gemm followed by ep, in one launch: c = op(a)·op(bm) (+ c),
// then + bias and ReLU, or the ReLU gradient's mask. The bias and the
// mask must not overlap c. It is safe for concurrent use.
func (b *Backend) GemmEp(transA, transB, acc bool, m, n, k int, a, bm, c *tensor.Dense, ep GemmEpilogue) error {
	if err := b.enterLaunch(); err != nil {
		return err
	}
	defer b.exit()
	if err := dims(m, n, k); err != nil {
		return fmt.Errorf("gemm %dx%dx%d: %w", m, n, k, err)
	}
	pa, err := b.operand("gemm a", a, tensor.Float32, int64(m)*int64(k))
	if err != nil {
		return err
	}
	pb, err := b.operand("gemm b", bm, tensor.Float32, int64(k)*int64(n))
	if err != nil {
		return err
	}
	pc, err := b.operand("gemm c", c, tensor.Float32, int64(m)*int64(n))
	if err != nil {
		return err
	}
	ins := []operand{pa, pb}
	var pbias, py operand
	if ep.ReLU && ep.Bias == nil {
		return fmt.Errorf("%w: gemm: a ReLU epilogue needs a bias", ErrBounds)
	}
	if ep.Bias != nil {
		if pbias, err = b.operand("gemm bias", ep.Bias, tensor.Float32, int64(n)); err != nil {
			return err
		}
		ins = append(ins, pbias)
	}
	if ep.ReLUGradOf != nil {
		if py, err = b.operand("gemm relu gradient y", ep.ReLUGradOf, tensor.Float32, int64(m)*int64(n)); err != nil {
			return err
		}
		ins = append(ins, py)
	}
	if err := disjoint([]operand{pc}, []string{"c"}, ins); err != nil {
		return err
	}
	if m == 0 || n == 0 {
		return nil
	}
	flags := uint64(0)
	if ep.Bias != nil {
		flags |= 8
		if ep.ReLU {
			flags |= 16
		}
	}
	if ep.ReLUGradOf != nil {
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
	tiles := int64((m+15)/16) * int64((n+15)/16)
	return b.launchGrid(kernels.Gemm, tiles*gemmThreads, 1, 1, pa.addr, pb.addr, pc.addr, uint64(m), uint64(n), uint64(k), flags,
		pbias.addr, py.addr)
}

// BiasReLU adds bias[j] to column j of the row-major float32 matrix z
// [rows, cols] in place and, with relu, sets negative results to 0
// (kernels/bias_relu.cu):
//
//	for i := range rows {
//		for j := range cols {
//			v := z[i*cols+j] + bias[j]
//			if relu && v < 0 {
//				v = 0
//			}
//			z[i*cols+j] = v
//		}
//	}
//
// bias must not overlap z. It is safe for concurrent use.
func (b *Backend) BiasReLU(z, bias *tensor.Dense, rows, cols int, relu bool) error {
	if err := b.enterLaunch(); err != nil {
		return err
	}
	defer b.exit()
	if err := dims(rows, cols); err != nil {
		return fmt.Errorf("bias: %w", err)
	}
	pz, err := b.operand("bias z", z, tensor.Float32, int64(rows)*int64(cols))
	if err != nil {
		return err
	}
	pb, err := b.operand("bias", bias, tensor.Float32, int64(cols))
	if err != nil {
		return err
	}
	if err := disjoint([]operand{pz}, []string{"z"}, []operand{pb}); err != nil {
		return err
	}
	n := int64(rows) * int64(cols)
	if n == 0 {
		return nil
	}
	r := uint64(0)
	if relu {
		r = 1
	}
	return b.launchGrid(kernels.BiasReLU, n, 1, 1, pz.addr, pb.addr, uint64(rows), uint64(cols), r)
}

// ReLUGrad zeroes dy[i] wherever y[i], a ReLU's output, is not positive:
// the gradient through the ReLU, in place, over n float32 elements
// (kernels/relu_grad.cu):
//
//	for i := range n {
//		if !(y[i] > 0) {
//			dy[i] = 0
//		}
//	}
//
// y must not overlap dy. It is safe for concurrent use.
func (b *Backend) ReLUGrad(dy, y *tensor.Dense, n int) error {
	if err := b.enterLaunch(); err != nil {
		return err
	}
	defer b.exit()
	if err := dims(n); err != nil {
		return fmt.Errorf("relu gradient: %w", err)
	}
	pd, err := b.operand("relu gradient dy", dy, tensor.Float32, int64(n))
	if err != nil {
		return err
	}
	py, err := b.operand("relu gradient y", y, tensor.Float32, int64(n))
	if err != nil {
		return err
	}
	if err := disjoint([]operand{pd}, []string{"dy"}, []operand{py}); err != nil {
		return err
	}
	if n == 0 {
		return nil
	}
	return b.launchGrid(kernels.ReLUGrad, int64(n), 1, 1, pd.addr, py.addr, uint64(n))
}

// ColSum writes the sum of each column of the row-major float32 matrix x
// [rows, cols], added in row order, to out[j]: a bias gradient
// (kernels/col_sum.cu):
//
//	for j := range cols {
//		s := float32(0)
//		for i := range rows {
//			s = s + x[i*cols+j]
//		}
//		out[j] = s
//	}
//
// out must not overlap x. It is safe for concurrent use.
func (b *Backend) ColSum(x, out *tensor.Dense, rows, cols int) error {
	if err := b.enterLaunch(); err != nil {
		return err
	}
	defer b.exit()
	if err := dims(rows, cols); err != nil {
		return fmt.Errorf("column sum: %w", err)
	}
	px, err := b.operand("column sum x", x, tensor.Float32, int64(rows)*int64(cols))
	if err != nil {
		return err
	}
	po, err := b.operand("column sum out", out, tensor.Float32, int64(cols))
	if err != nil {
		return err
	}
	if err := disjoint([]operand{po}, []string{"out"}, []operand{px}); err != nil {
		return err
	}
	if cols == 0 {
		return nil
	}
	return b.launchGrid(kernels.ColSum, int64(cols), 1, 1, px.addr, po.addr, uint64(rows), uint64(cols))
}

// Argmax writes the index of the first largest element of each row of
// the row-major float32 matrix x [rows, cols] to out (int64 [rows]): the
// greedy actions of Q-values (kernels/argmax.cu):
//
//	for i := range rows {
//		best := 0
//		for j := 1; j < cols; j++ {
//			if x[i*cols+j] > x[i*cols+best] {
//				best = j
//			}
//		}
//		out[i] = int64(best)
//	}
//
// cols must be at least 1 and out must not overlap x. It is safe for
// concurrent use.
func (b *Backend) Argmax(x, out *tensor.Dense, rows, cols int) error {
	if err := b.enterLaunch(); err != nil {
		return err
	}
	defer b.exit()
	if err := dims(rows, cols); err != nil || cols < 1 {
		return fmt.Errorf("%w: argmax of %d rows of %d", ErrBounds, rows, cols)
	}
	px, err := b.operand("argmax x", x, tensor.Float32, int64(rows)*int64(cols))
	if err != nil {
		return err
	}
	po, err := b.operand("argmax out", out, tensor.Int64, int64(rows))
	if err != nil {
		return err
	}
	if err := disjoint([]operand{po}, []string{"out"}, []operand{px}); err != nil {
		return err
	}
	if rows == 0 {
		return nil
	}
	return b.launchGrid(kernels.Argmax, int64(rows), 1, 1, px.addr, po.addr, uint64(rows), uint64(cols))
}
