//go:build trajring_cuda

package dqn

import (
	"fmt"

	"github.com/trajring/trajring/gpu"
	"github.com/trajring/trajring/internal/rawbytes"
	"github.com/trajring/trajring/kernels"
	"github.com/trajring/trajring/tensorbuf"
	"gorgonia.org/tensor"
)

// DeviceBatch is a training batch for a DeviceLearner: device tensors of
// its backend, row-major and contiguous, BatchSize rows each. It is a
// plain value.
type DeviceBatch struct {
	// Obs and NextObs are float32 [BatchSize, ObsDim].
	Obs, NextObs *tensor.Dense
	// Actions are int64 [BatchSize]; an action outside [0, NumActions)
	// makes its transition count for nothing (no gradient, priority 0).
	Actions *tensor.Dense
	// Reward and Discount are float32 [BatchSize]: the n-step reward sum
	// and the bootstrap factor (gamma^k, 0 after a termination).
	Reward, Discount *tensor.Dense
	// Weights are float64 [BatchSize] importance weights (a
	// device-selected batch's WeightTensor); nil means 1.
	Weights *tensor.Dense
	// Valid is uint8 or bool [BatchSize], 0 or false masking a
	// transition out; nil means all valid.
	Valid *tensor.Dense
}

// BatchFromTransitions returns the DeviceBatch of table transitions held
// in device memory (a gpu backend's SampleTransitionsInto): observation
// field obs (float32, ObsDim per row) at t and t+1, action field act
// (int64), rewards and discounts, with the given importance weights and
// validity mask (nil: 1 and all valid). Nothing is copied.
func (l *DeviceLearner) BatchFromTransitions(tr *tensorbuf.Transitions, obs, act string, weights, valid *tensor.Dense) (DeviceBatch, error) {
	if tr == nil {
		return DeviceBatch{}, fmt.Errorf("%w: no transitions", ErrConfig)
	}
	b := DeviceBatch{Obs: tr.Observation[obs], NextObs: tr.NextObservation[obs], Actions: tr.Action[act],
		Reward: tr.Reward, Discount: tr.Discount, Weights: weights, Valid: valid}
	if b.Obs == nil || b.NextObs == nil || b.Actions == nil {
		return DeviceBatch{}, fmt.Errorf("%w: observation %q or action %q missing from the transitions", ErrConfig, obs, act)
	}
	return b, l.check(b)
}

// check validates a batch before anything is queued.
func (l *DeviceLearner) check(b DeviceBatch) error {
	B, d := l.cfg.BatchSize, l.cfg.ObsDim
	valid := tensor.Uint8
	if b.Valid != nil && b.Valid.Dtype() == tensor.Bool {
		valid = tensor.Bool
	}
	for _, f := range []struct {
		name     string
		t        *tensor.Dense
		dt       tensor.Dtype
		n        int
		optional bool
	}{
		{"Obs", b.Obs, tensor.Float32, B * d, false}, {"NextObs", b.NextObs, tensor.Float32, B * d, false},
		{"Actions", b.Actions, tensor.Int64, B, false}, {"Reward", b.Reward, tensor.Float32, B, false},
		{"Discount", b.Discount, tensor.Float32, B, false}, {"Weights", b.Weights, tensor.Float64, B, true},
		{"Valid", b.Valid, valid, B, true},
	} {
		if f.t == nil && f.optional {
			continue
		}
		if f.t == nil || f.t.Dtype() != f.dt || f.t.Shape().TotalSize() != f.n {
			return fmt.Errorf("%w: batch %s: want %v of %d elements (batch %d, observation %d)", ErrConfig, f.name, f.dt, f.n, B, d)
		}
		if err := l.be.CheckSource(f.t, int64(f.n)*int64(f.dt.Size())); err != nil {
			return fmt.Errorf("%w: batch %s: %w", ErrConfig, f.name, err)
		}
	}
	return nil
}

// TrainTransitions is BatchFromTransitions followed by TrainStep.
func (l *DeviceLearner) TrainTransitions(tr *tensorbuf.Transitions, obs, act string, weights, valid *tensor.Dense) error {
	b, err := l.BatchFromTransitions(tr, obs, act, weights, valid)
	if err != nil {
		return err
	}
	return l.TrainStep(b)
}

// TrainStep queues one gradient step on b: the forward passes (online on
// s and s', target on s'), the TD loss and its gradient, backpropagation,
// the global gradient norm clipped to MaxGradNorm, and Adam; and the
// batch's TD errors and new priorities (TD, Priorities). It returns once
// the work is queued (2L+1 launches for L layers: 7 for two hidden
// layers), without
// waiting for the device. A batch of the wrong shape, dtype or memory
// returns ErrConfig and queues nothing.
func (l *DeviceLearner) TrainStep(b DeviceBatch) error {
	if err := l.check(b); err != nil {
		return err
	}
	var err error
	if l.useGraph && !l.capturing { // a round's capture records the step itself
		err = l.stepGraph(b)
	} else {
		err = l.step(b)
	}
	if err != nil {
		return fmt.Errorf("dqn: device training step: %w", err)
	}
	l.steps++
	return nil
}

// step queues one gradient step in 2L+1 launches for L layers (4 for a
// linear network): a layer's forward products on s and s' (online and
// target) in one (Gemm3), the last layer's with the TD loss (TDHead, when
// the network has a hidden layer: its inputs are then the learner's own
// tensors), a layer's gradients in one (GemmBack, the first layer's with
// the gradient norm), and Adam. Every sum keeps the order of the
// separate launches (stepSeparate), so the two write the same bytes
// (TestDeviceLearnerFusedIsSeparate).
func (l *DeviceLearner) step(b DeviceBatch) error {
	if l.separate {
		return l.stepSeparate(b)
	}
	be, B, L := l.be, l.cfg.BatchSize, len(l.dims)-1
	xs, xn := b.Obs, b.NextObs
	last := L // the layers Gemm3 computes; the head takes the last
	if l.head != nil {
		last = L - 1
	}
	for i := range last {
		k, n := l.dims[i], l.dims[i+1]
		relu := i+1 < L
		ps := make([]gpu.GemmProduct, 0, 3)
		ps = append(ps, gpu.GemmProduct{A: xs, B: l.pw[i], C: l.h[i], Ep: gpu.GemmEpilogue{Bias: l.pb[i], ReLU: relu}})
		if l.cfg.DoubleDQN {
			ps = append(ps, gpu.GemmProduct{A: xn, B: l.pw[i], C: l.hn[i], Ep: gpu.GemmEpilogue{Bias: l.pb[i], ReLU: relu}})
		}
		xt := xn
		if i > 0 {
			xt = l.ht[i-1]
		}
		ps = append(ps, gpu.GemmProduct{A: xt, B: l.tw[i], C: l.ht[i], Ep: gpu.GemmEpilogue{Bias: l.tb[i], ReLU: relu}})
		if err := be.Gemm3(false, false, false, B, n, k, ps...); err != nil {
			return err
		}
		xs, xn = l.h[i], l.hn[i]
	}
	if l.head != nil {
		w := b.Weights
		if w == nil {
			w = l.ones
		}
		if err := l.head.Step(b.Actions, b.Reward, b.Discount, w, b.Valid); err != nil {
			return err
		}
	} else if err := l.tdLoss(b); err != nil {
		return err
	}
	dz, next := l.dq, 0
	for i := L - 1; i >= 0; i-- {
		a := gpu.GemmBackArgs{Batch: B, In: l.dims[i], Out: l.dims[i+1], X: b.Obs, DZ: dz, W: l.pw[i], GW: l.gw[i], GB: l.gb[i]}
		if i > 0 {
			a.X, a.DX, a.Y = l.h[i-1], l.dz[next], l.h[i-1]
		} else if l.cfg.MaxGradNorm > 0 {
			a.G, a.N, a.Parts, a.NormState, a.MaxNorm = l.grads, l.nparam, normParts, l.normState, l.cfg.MaxGradNorm
		}
		if err := be.GemmBack(a); err != nil {
			return err
		}
		dz, next = a.DX, 1-next
	}
	return l.adam()
}

// tdLoss queues the TD loss of the last forward passes on b.
func (l *DeviceLearner) tdLoss(b DeviceBatch) error {
	L := len(l.dims) - 1
	qno := (*tensor.Dense)(nil)
	if l.cfg.DoubleDQN {
		qno = l.hn[L-1]
	}
	w := b.Weights
	if w == nil {
		w = l.ones
	}
	return l.be.TDLoss(gpu.TDLossArgs{
		Q: l.h[L-1], QNextOnline: qno, QNextTarget: l.ht[L-1], Actions: b.Actions, Reward: b.Reward,
		Discount: b.Discount, Weights: w, Valid: b.Valid, Batch: l.cfg.BatchSize, NumActions: l.cfg.NumActions,
		PriorityEpsilon: l.cfg.PriorityEpsilon, DQ: l.dq, TD: l.td, Priorities: l.prio, RowLoss: l.rl,
	})
}

// adam queues Adam's step on the gradients, scaled by the norm's
// clipping factor when MaxGradNorm is set. While a graph is captured
// (capturing) it queues AdamDevice, whose learning rate and step count
// are the hyper block's, and leaves adamT alone (nothing runs).
func (l *DeviceLearner) adam() error {
	scale := (*tensor.Dense)(nil)
	if l.cfg.MaxGradNorm > 0 {
		scale = l.sc
	}
	if l.capturing {
		return l.be.AdamDevice(l.params, l.grads, l.m, l.v, l.nparam, scale, l.hyper)
	}
	if err := l.be.Adam(l.params, l.grads, l.m, l.v, l.nparam, scale, l.lr, l.adamT+1); err != nil {
		return err
	}
	l.adamT++
	return nil
}

// stepSeparate is step in the launches of the unfused operations (3L
// forward products, the TD loss, 3L-1 for the gradients, two for the
// norm, Adam): the reference the fused step is tested against.
func (l *DeviceLearner) stepSeparate(b DeviceBatch) error {
	be := l.be
	if err := l.forward(l.pw, l.pb, b.Obs, l.h); err != nil {
		return err
	}
	if l.cfg.DoubleDQN {
		if err := l.forward(l.pw, l.pb, b.NextObs, l.hn); err != nil {
			return err
		}
	}
	if err := l.forward(l.tw, l.tb, b.NextObs, l.ht); err != nil {
		return err
	}
	if err := l.tdLoss(b); err != nil {
		return err
	}
	if err := l.backward(b.Obs); err != nil {
		return err
	}
	if l.cfg.MaxGradNorm > 0 {
		if err := be.GradNorm(l.grads, l.nparam, l.partial, normParts, l.cfg.MaxGradNorm, l.norm, l.sc); err != nil {
			return err
		}
	}
	return l.adam()
}

// forward runs the network (ws, bs) on x [B, ObsDim] into outs, one per
// layer: products, then bias and ReLU (none on the last layer), the
// order of Agent's training graph; one launch a layer (the bias and ReLU
// are the product's epilogue).
func (l *DeviceLearner) forward(ws, bs []*tensor.Dense, x *tensor.Dense, outs []*tensor.Dense) error {
	B, in := l.cfg.BatchSize, x
	for i := range ws {
		k, n := l.dims[i], l.dims[i+1]
		if err := l.be.GemmEp(false, false, false, B, n, k, in, ws[i], outs[i],
			gpu.GemmEpilogue{Bias: bs[i], ReLU: i+1 < len(ws)}); err != nil {
			return err
		}
		in = outs[i]
	}
	return nil
}

// backward writes the gradients of every layer from dq (the loss's
// gradient with respect to Q) through the activations of the last
// forward pass on x.
func (l *DeviceLearner) backward(x *tensor.Dense) error {
	be, B := l.be, l.cfg.BatchSize
	dz, next := l.dq, 0
	for i := len(l.pw) - 1; i >= 0; i-- {
		k, n := l.dims[i], l.dims[i+1]
		in := x
		if i > 0 {
			in = l.h[i-1]
		}
		// dW = in^T · dZ; db = column sums of dZ
		if err := be.Gemm(true, false, false, k, n, B, in, dz, l.gw[i]); err != nil {
			return err
		}
		if err := be.ColSum(dz, l.gb[i], B, n); err != nil {
			return err
		}
		if i == 0 {
			break
		}
		// dH = dZ · W^T, then through the ReLU of layer i-1 (the
		// product's epilogue)
		dh := l.dz[next]
		if err := be.GemmEp(false, true, false, B, k, n, dz, l.pw[i], dh, gpu.GemmEpilogue{ReLUGradOf: l.h[i-1]}); err != nil {
			return err
		}
		dz, next = dh, 1-next
	}
	return nil
}

// Loss copies the last step's per-transition losses to the host (a
// metric: it waits for the device) and returns their mean over the
// batch, the weighted Huber loss before the step.
func (l *DeviceLearner) Loss() (float64, error) {
	B := l.cfg.BatchSize
	rl := make([]float32, B)
	if err := l.download(rl, l.rl); err != nil {
		return 0, err
	}
	var s float32
	for _, v := range rl {
		s += v
	}
	return float64(s / float32(B)), nil
}

// download copies a float32 device tensor of the learner to dst.
func (l *DeviceLearner) download(dst []float32, t *tensor.Dense) error {
	a, off, err := l.locate(t)
	if err != nil {
		return err
	}
	if err := l.be.Download(rawbytes.Of(dst), a, off); err != nil {
		return fmt.Errorf("dqn: device learner: %w", err)
	}
	return nil
}

// Network copies the online network to the host (waiting for the
// device), for evaluation and checkpoints.
func (l *DeviceLearner) Network() (*Network, error) {
	flat := make([]float32, l.nparam)
	if err := l.download(flat, l.params); err != nil {
		return nil, err
	}
	return l.networkFrom(flat), nil
}

// networkFrom returns the network of the flat parameters (the online
// parameters' layout), copied.
func (l *DeviceLearner) networkFrom(flat []float32) *Network {
	m := &mlp{dims: append([]int(nil), l.dims...)}
	off := 0
	for i := range len(l.dims) - 1 {
		k, n := l.dims[i], l.dims[i+1]
		m.w = append(m.w, append([]float32(nil), flat[off:off+k*n]...))
		off += k * n
		m.b = append(m.b, append([]float32(nil), flat[off:off+n]...))
		off += n
	}
	return &Network{m: m}
}

// locate returns the arena and offset of one of the learner's tensors.
func (l *DeviceLearner) locate(t *tensor.Dense) (a kernels.Arena, off int64, err error) {
	p := uint64(t.Uintptr())
	for _, m := range l.mem {
		ga := m.(*gpu.Arena)
		base := uint64(ga.Ptr())
		if p >= base && p < base+uint64(ga.Size()) {
			return m, int64(p - base), nil
		}
	}
	return nil, 0, fmt.Errorf("%w: tensor at %#x is not the learner's", ErrConfig, p)
}
