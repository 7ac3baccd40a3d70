//go:build trajring_cuda

package gpu

import (
	"fmt"
	"math"

	"github.com/trajring/trajring/kernels"
	"gorgonia.org/tensor"
)

// TDLossArgs are the operands of TDLoss: device tensors of the backend,
// row-major. It is a plain value.
type TDLossArgs struct {
	// Q, QNextOnline and QNextTarget are float32 [Batch, NumActions]: the
	// online network's Q(s,·) and Q(s',·) and the target network's
	// Q(s',·). A nil QNextOnline picks the next action with the target
	// network (plain DQN) instead of the online one (double DQN).
	Q, QNextOnline, QNextTarget *tensor.Dense
	// Actions are int64 [Batch]; Reward and Discount float32 [Batch] (the
	// n-step reward sum and the bootstrap factor gamma^k, 0 after a
	// termination); Weights float64 [Batch] importance weights (such as
	// Batch.WeightTensor); Valid uint8 or bool [Batch], 0 or false to mask
	// a transition out (nil: all valid).
	Actions, Reward, Discount, Weights, Valid *tensor.Dense
	Batch, NumActions                         int
	// PriorityEpsilon is added to |TD| for the new priorities.
	PriorityEpsilon float64
	// Outputs: DQ float32 [Batch, NumActions], the gradient of the mean
	// loss with respect to Q; TD, Priorities and RowLoss float32 [Batch].
	DQ, TD, Priorities, RowLoss *tensor.Dense
}

// TDLoss computes the double-DQN TD errors, the weighted Huber loss
// (delta 1) per transition, its gradient with respect to the online
// Q-values and new priorities, in one launch (kernels/td_loss.cu). With
// wi = float32(Weights[i]) where Valid[i], else 0, and every operation
// on float32:
//
//	a := Actions[i] // outside [0, NumActions): DQ, TD, Priorities, RowLoss of the row 0
//	best := argmax_j QNextOnline[i, j] // the first largest
//	y := Reward[i] + Discount[i]*QNextTarget[i, best]
//	d := Q[i, a] - y
//	r := max(|d|-1, 0); c := |d| - r
//	RowLoss[i] = (c*c*0.5 + r) * wi
//	DQ[i, ·] = 0; DQ[i, a] = wi*clamp(d, -1, 1) / float32(Batch)
//	TD[i] = d
//	Priorities[i] = float32(|float64(d)| + PriorityEpsilon) if wi != 0, else 0
//
// (the full loop is kernels/host.RefTDLoss). The loss is the sum of
// RowLoss over Batch, the mean the CPU learner (agents/dqn) takes, and
// Priorities go to Table.UpdatePrioritiesDevice as they are. The outputs
// must not overlap each other or the inputs; PriorityEpsilon must be
// finite and at least 0. An empty batch launches nothing. It is safe for
// concurrent use.
func (b *Backend) TDLoss(a TDLossArgs) error {
	if err := b.enterLaunch(); err != nil {
		return err
	}
	defer b.exit()
	if err := dims(a.Batch, a.NumActions); err != nil || a.NumActions < 1 {
		return fmt.Errorf("%w: TD loss of %d transitions of %d actions", ErrBounds, a.Batch, a.NumActions)
	}
	if !(a.PriorityEpsilon >= 0) || math.IsInf(a.PriorityEpsilon, 1) {
		return fmt.Errorf("%w: priority epsilon %v", ErrBounds, a.PriorityEpsilon)
	}
	B, BA := int64(a.Batch), int64(a.Batch)*int64(a.NumActions)
	var ins, outs [9]operand
	var err error
	type spec struct {
		name string
		t    *tensor.Dense
		dt   tensor.Dtype
		n    int64
		dst  *operand
	}
	valid := tensor.Uint8
	if a.Valid != nil && a.Valid.Dtype() == tensor.Bool {
		valid = tensor.Bool
	}
	specs := []spec{
		{"Q", a.Q, tensor.Float32, BA, &ins[0]}, {"QNextTarget", a.QNextTarget, tensor.Float32, BA, &ins[1]},
		{"Actions", a.Actions, tensor.Int64, B, &ins[2]}, {"Reward", a.Reward, tensor.Float32, B, &ins[3]},
		{"Discount", a.Discount, tensor.Float32, B, &ins[4]}, {"Weights", a.Weights, tensor.Float64, B, &ins[5]},
		{"QNextOnline", a.QNextOnline, tensor.Float32, BA, &ins[6]}, {"Valid", a.Valid, valid, B, &ins[7]},
		{"DQ", a.DQ, tensor.Float32, BA, &outs[0]}, {"TD", a.TD, tensor.Float32, B, &outs[1]},
		{"Priorities", a.Priorities, tensor.Float32, B, &outs[2]}, {"RowLoss", a.RowLoss, tensor.Float32, B, &outs[3]},
	}
	for _, s := range specs {
		if s.t == nil && (s.name == "QNextOnline" || s.name == "Valid") {
			continue
		}
		if *s.dst, err = b.operand(s.name, s.t, s.dt, s.n); err != nil {
			return fmt.Errorf("TD loss: %w", err)
		}
	}
	if err := disjoint(outs[:4], []string{"DQ", "TD", "Priorities", "RowLoss"}, ins[:8]); err != nil {
		return err
	}
	if B == 0 {
		return nil
	}
	return b.launchGrid(kernels.TDLoss, B, 1, 1, ins[0].addr, ins[6].addr, ins[1].addr, ins[2].addr, ins[3].addr, ins[4].addr,
		ins[5].addr, ins[7].addr, uint64(B), uint64(a.NumActions), math.Float64bits(a.PriorityEpsilon),
		outs[0].addr, outs[1].addr, outs[2].addr, outs[3].addr)
}

// GradNorm writes the norm of the float32 gradient g [n] (norm: float64
// [1]) and the factor that clips it to maxNorm (scale: float32 [1]), in
// two launches (kernels/norm_partial.cu, kernels/norm_finish.cu) whose
// result does not depend on the device or grid: parts strided partial
// sums of squares in float64 go to partial (float64 [parts], scratch),
// then one thread adds them in order:
//
//	for p := range parts {
//		s := 0.0
//		for i := p; i < n; i += parts {
//			s = s + float64(g[i])*float64(g[i])
//		}
//		partial[p] = s
//	}
//	t := 0.0
//	for p := range parts {
//		t = t + partial[p]
//	}
//	norm[0] = math.Sqrt(t)
//	scale[0] = 1
//	if norm[0] > maxNorm {
//		scale[0] = float32(maxNorm / (norm[0] + 1e-6))
//	}
//
// The factor is the CPU learner's (agents/dqn), whose norm adds the same
// squares in another order. Adam applies it. parts must be at least 1
// and maxNorm must not be NaN; the outputs must not overlap each other or
// g. It is safe for concurrent use.
func (b *Backend) GradNorm(g *tensor.Dense, n int, partial *tensor.Dense, parts int, maxNorm float64, norm, scale *tensor.Dense) error {
	if err := b.enterLaunch(); err != nil {
		return err
	}
	defer b.exit()
	if err := dims(n, parts); err != nil || parts < 1 || math.IsNaN(maxNorm) {
		return fmt.Errorf("%w: norm of %d values in %d parts, clipped to %v", ErrBounds, n, parts, maxNorm)
	}
	pg, err := b.operand("norm g", g, tensor.Float32, int64(n))
	if err != nil {
		return err
	}
	pp, err := b.operand("norm partial", partial, tensor.Float64, int64(parts))
	if err != nil {
		return err
	}
	pn, err := b.operand("norm", norm, tensor.Float64, 1)
	if err != nil {
		return err
	}
	ps, err := b.operand("norm scale", scale, tensor.Float32, 1)
	if err != nil {
		return err
	}
	if err := disjoint([]operand{pp, pn, ps}, []string{"partial", "norm", "scale"}, []operand{pg}); err != nil {
		return err
	}
	if err := b.launchGrid(kernels.NormPartial, int64(parts), 1, 1, pg.addr, uint64(n), uint64(parts), pp.addr); err != nil {
		return err
	}
	return b.launchGrid(kernels.NormFinish, 1, 1, 1, pp.addr, uint64(parts), math.Float64bits(maxNorm), pn.addr, ps.addr)
}

// Adam takes step t (from 1) of Adam with learning rate lr, betas 0.9 and
// 0.999 and epsilon 1e-8 over the float32 parameters w [n], with
// gradients g (multiplied first by scale[0], GradNorm's factor, unless
// scale is nil) and moments m and v, in one launch (kernels/adam.cu),
// exactly as agents/dqn's adam.step does on float32:
//
//	c1 := float32(1) / float32(1-math.Pow(0.9, float64(t)))
//	c2 := float32(1) / float32(1-math.Pow(0.999, float64(t)))
//	for j := range n {
//		gj := g[j] * scale[0]
//		m[j] = float32(m[j]*0.9) + gj*float32(1-0.9)
//		v[j] = float32(v[j]*0.999) + float32(gj*gj)*float32(1-0.999)
//		mh := float32(m[j]*c1) * -float32(lr)
//		vh := float32(math.Sqrt(float64(float32(v[j]*c2)))) + float32(1e-8)
//		w[j] = w[j] + mh/vh
//	}
//
// (the full loop, with float32 constants, is kernels/host.RefAdam). g is
// left unchanged. w, m and v must not overlap each other, g or scale; lr
// must be finite and at least 0 and t at least 1. It is safe for
// concurrent use.
func (b *Backend) Adam(w, g, m, v *tensor.Dense, n int, scale *tensor.Dense, lr float64, t int64) error {
	if !(lr >= 0) || math.IsInf(lr, 1) || t < 1 {
		return fmt.Errorf("%w: Adam step %d of %d parameters at rate %v", ErrBounds, t, n, lr)
	}
	k := adamConsts(lr, t)
	return b.adam(w, g, m, v, n, scale, nil, k.negLR, k.c1, k.c2)
}

// adamK are the per-step constants of an Adam launch.
type adamK struct{ negLR, c1, c2 float32 }

// adamConsts returns step t's constants at rate lr, computed as
// agents/dqn's adam computes them (the bits the hyper table holds too).
func adamConsts(lr float64, t int64) adamK {
	const beta1, beta2 = 0.9, 0.999
	return adamK{negLR: -float32(lr),
		c1: float32(1) / float32(1-math.Pow(beta1, float64(t))),
		c2: float32(1) / float32(1-math.Pow(beta2, float64(t)))}
}

// adam queues trajring_adam with the constants passed (hyper nil) or read
// from the hyper block (AdamDevice).
func (b *Backend) adam(w, g, m, v *tensor.Dense, n int, scale, hyper *tensor.Dense, negLR, c1, c2 float32) error {
	if err := b.enterLaunch(); err != nil {
		return err
	}
	defer b.exit()
	if err := dims(n); err != nil {
		return fmt.Errorf("%w: Adam step of %d parameters", ErrBounds, n)
	}
	var ops [6]operand
	var err error
	for i, x := range []*tensor.Dense{w, g, m, v} {
		if ops[i], err = b.operand([]string{"Adam w", "Adam g", "Adam m", "Adam v"}[i], x, tensor.Float32, int64(n)); err != nil {
			return err
		}
	}
	if scale != nil {
		if ops[4], err = b.operand("Adam scale", scale, tensor.Float32, 1); err != nil {
			return err
		}
	}
	if hyper != nil {
		if ops[5], err = b.operand("Adam hyper", hyper, tensor.Uint64, int64(AdamHyperWords())); err != nil {
			return err
		}
	}
	if err := disjoint([]operand{ops[0], ops[2], ops[3], ops[5]}, []string{"w", "m", "v", "hyper"}, []operand{ops[1], ops[4]}); err != nil {
		return err
	}
	if n == 0 && hyper == nil {
		return nil // nothing to update; AdamDevice still launches, to advance its count
	}
	const beta1, beta2, eps = 0.9, 0.999, 1e-8
	b1, b2 := float32(beta1), float32(beta2)
	f := func(x float32) uint64 { return math.Float64bits(float64(x)) }
	return b.launchGrid(kernels.Adam, int64(n), 1, 1, ops[0].addr, ops[1].addr, ops[2].addr, ops[3].addr, uint64(n), ops[4].addr,
		f(b1), f(b2), f(1-b1), f(1-b2), f(float32(eps)), f(negLR), f(c1), f(c2), ops[5].addr)
}
