//go:build trajring_cuda

package dqn

import (
	"errors"
	"fmt"
	"math"

	"github.com/trajring/trajring/gpu"
	"github.com/trajring/trajring/internal/rawbytes"
	"github.com/trajring/trajring/kernels"
	"gorgonia.org/tensor"
)

// DeviceLearner is Agent's learner with every tensor in a gpu.Backend's
// device memory: the online and target weights, the gradients, Adam's
// moments and all activations. A training step is a fixed sequence of
// kernel launches on the backend's stream (the gpu package's Gemm,
// BiasReLU, ReLUGrad, ColSum, TDLoss, GradNorm, Adam, fused as Gemm3 and
// GemmBack, the last layer with the TD loss as a TDHead: 2L+1 launches
// for L layers) that reads a batch
// of transitions in place: nothing is copied between host and device and
// nothing waits, so a table on the same backend samples before the step
// and takes the new priorities after it (Table.UpdatePrioritiesDevice
// with Priorities) in stream order, with no events.
//
// The algorithm and defaults are Agent's (same Config): a ReLU MLP, the
// Huber loss (delta 1) with importance weights and a validity mask,
// double DQN, n-step targets (the transitions' discounts), the global
// gradient norm clipped to MaxGradNorm, Adam with gorgonia's constants.
// It starts from the weights Agent would draw from Config.Seed. Its
// results equal Agent's up to float32 rounding: the forward pass adds
// in Agent's training order (products, then bias), the gradients in
// another (the tolerances are in device_learner_test.go).
//
// With UseGraph the step is captured once as a CUDA graph and replayed
// with one driver call a step (device_graph.go), the same bytes.
//
// A DeviceLearner is not safe for concurrent use.
type DeviceLearner struct {
	cfg  Config
	dims []int
	be   *gpu.Backend
	mem  []kernels.Arena
	// flat parameter-shaped buffers, layout w0, b0, w1, b1, ...
	nparam                    int
	params, grads, m, v, targ *tensor.Dense
	pw, pb, gw, gb, tw, tb    []*tensor.Dense
	targArena, paramArena     kernels.Arena
	// activations [B, dims[l+1]] of the online network on s and s', and
	// of the target network on s'
	h, hn, ht []*tensor.Dense
	dz        [2]*tensor.Dense // backward ping-pong [B, max hidden]
	dq, td    *tensor.Dense
	prio, rl  *tensor.Dense
	// the gradient norm's state (gpu.GemmBackArgs.NormState: a counter,
	// the norm, the clipping factor, the partial sums), and views of its
	// norm, factor and partial sums
	normState, partial *tensor.Dense
	norm, sc           *tensor.Dense
	ones               *tensor.Dense // float64 [B] weights of 1, for batches without importance weights
	act                *actScratch   // Act's memory, nil until the first call
	lr                 float64
	steps              int64 // gradient steps
	adamT              int64 // Adam's step count (Agent's may differ from steps after a LoadState)
	// head is the last layer and TD loss in one launch (nil for a linear
	// network, whose last layer reads the batch)
	head *gpu.TDHead
	// separate makes TrainStep launch the unfused operations
	// (stepSeparate), for tests of the fused step.
	separate bool
	// The graph path (UseGraph, device_graph.go): the step captured as
	// a CUDA graph for the batch tensors in graphKey, Adam's hyper block
	// (its learning rate and step count in device memory) and what the
	// device's copy of them is known to be (devT -1, devLR NaN:
	// unknown).
	useGraph, capturing bool
	graph               *gpu.Graph
	graphKey            batchKey
	hyper               *tensor.Dense
	hyperArena          kernels.Arena
	devT                int64
	devLR               float64
	captures            int64
	captureFails        int // failed captures in a row (stepGraph)
	graphLaunches       int64
	graphErr            error
	rounds              int64 // RoundGraph launches (device_round.go)
	records             int64 // rounds recorded
	roundGraphs         map[*RoundGraph]struct{}
}

// normParts is the number of partial sums of the gradient norm.
const normParts = 256

// NewDeviceLearner allocates a learner for cfg on be (normally the
// buffer's backend, so that batches are its own device tensors) and
// uploads the initial weights (Agent's for the same Seed), the target
// network equal to them. A bad configuration returns a *FieldError
// (ErrConfig); a backend error (gpu.ErrOutOfMemory and others) is
// returned wrapped, with everything allocated so far freed.
func NewDeviceLearner(cfg Config, be *gpu.Backend) (*DeviceLearner, error) {
	if err := cfg.validate("", true); err != nil {
		return nil, err
	}
	if be == nil {
		return nil, fmt.Errorf("%w: no backend", ErrConfig)
	}
	cfg.Hidden = append([]int(nil), cfg.Hidden...)
	l := &DeviceLearner{cfg: cfg, be: be, lr: cfg.LearningRate}
	l.dims = append(append([]int{cfg.ObsDim}, cfg.Hidden...), cfg.NumActions)
	if err := l.alloc(); err != nil {
		l.Close()
		return nil, err
	}
	init := newMLP(l.dims, cfg.Seed)
	if err := l.upload(init); err != nil {
		l.Close()
		return nil, err
	}
	if err := l.UpdateTarget(); err != nil {
		l.Close()
		return nil, err
	}
	return l, nil
}

// arena allocates n bytes of device memory, which Close frees.
func (l *DeviceLearner) arena(n int64) (kernels.Arena, error) {
	a, err := l.be.Alloc(n)
	if err != nil {
		return nil, fmt.Errorf("dqn: device learner: %w", err)
	}
	l.mem = append(l.mem, a)
	return a, nil
}

// view returns a tensor over an arena, or records the first error.
func (l *DeviceLearner) view(a kernels.Arena, off int64, dt tensor.Dtype, err *error, shape ...int) *tensor.Dense {
	if *err != nil {
		return nil
	}
	t, e := l.be.Tensor(a, off, dt, shape...)
	if e != nil {
		*err = fmt.Errorf("dqn: device learner: %w", e)
	}
	return t
}

func (l *DeviceLearner) alloc() error {
	B, L := l.cfg.BatchSize, len(l.dims)-1
	for i := range L {
		l.nparam += l.dims[i]*l.dims[i+1] + l.dims[i+1]
	}
	var err error
	f32 := tensor.Float32
	flat := make([]kernels.Arena, 5)
	for i := range flat {
		if flat[i], err = l.arena(4 * int64(l.nparam)); err != nil {
			return err
		}
	}
	l.paramArena, l.targArena = flat[0], flat[4]
	l.params = l.view(flat[0], 0, f32, &err, l.nparam)
	l.grads = l.view(flat[1], 0, f32, &err, l.nparam)
	l.m = l.view(flat[2], 0, f32, &err, l.nparam)
	l.v = l.view(flat[3], 0, f32, &err, l.nparam)
	l.targ = l.view(flat[4], 0, f32, &err, l.nparam)
	off := int64(0)
	for i := range L {
		k, n := l.dims[i], l.dims[i+1]
		l.pw = append(l.pw, l.view(flat[0], off, f32, &err, k, n))
		l.gw = append(l.gw, l.view(flat[1], off, f32, &err, k, n))
		l.tw = append(l.tw, l.view(flat[4], off, f32, &err, k, n))
		off += 4 * int64(k*n)
		l.pb = append(l.pb, l.view(flat[0], off, f32, &err, n))
		l.gb = append(l.gb, l.view(flat[1], off, f32, &err, n))
		l.tb = append(l.tb, l.view(flat[4], off, f32, &err, n))
		off += 4 * int64(n)
	}
	// Scratch: three forward passes, two backward buffers, the TD
	// outputs and the norm, each at a 256-byte boundary.
	widest := 0
	for _, d := range l.dims[1:] {
		widest = max(widest, d)
	}
	var sizes []int64
	for range 3 {
		for i := range L {
			sizes = append(sizes, 4*int64(B*l.dims[i+1]))
		}
	}
	sizes = append(sizes, 4*int64(B*widest), 4*int64(B*widest), 4*int64(B*l.cfg.NumActions), 4*int64(B), 4*int64(B), 4*int64(B),
		8*int64(gpu.NormStateWords(normParts)), 8*int64(B))
	offs, total := make([]int64, len(sizes)), int64(0)
	for i, s := range sizes {
		offs[i] = total
		total += (s + 255) &^ 255
	}
	s, err := l.arena(total)
	if err != nil {
		return err
	}
	i := 0
	next := func(dt tensor.Dtype, shape ...int) *tensor.Dense {
		t := l.view(s, offs[i], dt, &err, shape...)
		i++
		return t
	}
	for _, hs := range []*[]*tensor.Dense{&l.h, &l.hn, &l.ht} {
		for j := range L {
			*hs = append(*hs, next(f32, B, l.dims[j+1]))
		}
	}
	l.dz[0], l.dz[1] = next(f32, B*widest), next(f32, B*widest)
	l.dq, l.td, l.prio, l.rl = next(f32, B, l.cfg.NumActions), next(f32, B), next(f32, B), next(f32, B)
	// The norm state, zero as allocated (its counter must be).
	ns := offs[i]
	l.normState = next(tensor.Uint64, gpu.NormStateWords(normParts))
	l.norm, l.sc = l.view(s, ns+8, tensor.Float64, &err, 1), l.view(s, ns+16, f32, &err, 1)
	l.partial = l.view(s, ns+24, tensor.Float64, &err, normParts)
	l.ones = next(tensor.Float64, B)
	if err != nil {
		return err
	}
	ones := make([]float64, B)
	for j := range ones {
		ones[j] = 1
	}
	if err := l.be.Upload(s, offs[len(offs)-1], rawbytes.Of(ones)); err != nil {
		return err
	}
	if L < 2 {
		return nil
	}
	a := gpu.TDHeadArgs{Batch: B, In: l.dims[L-1], NumActions: l.cfg.NumActions, X: l.h[L-2], XTarget: l.ht[L-2],
		W: l.pw[L-1], Bias: l.pb[L-1], WTarget: l.tw[L-1], BiasTarget: l.tb[L-1], Q: l.h[L-1], QNextTarget: l.ht[L-1],
		DQ: l.dq, TD: l.td, Priorities: l.prio, RowLoss: l.rl, PriorityEpsilon: l.cfg.PriorityEpsilon}
	if l.cfg.DoubleDQN {
		a.XNext, a.QNextOnline = l.hn[L-2], l.hn[L-1]
	}
	if l.head, err = l.be.NewTDHead(a); err != nil {
		return fmt.Errorf("dqn: device learner: %w", err)
	}
	return nil
}

// upload writes m's weights into the online parameters.
func (l *DeviceLearner) upload(m *mlp) error {
	flat := make([]float32, 0, l.nparam)
	for i := range m.w {
		flat = append(append(flat, m.w[i]...), m.b[i]...)
	}
	return l.be.Upload(l.paramArena, 0, rawbytes.Of(flat))
}

// Close frees the learner's device memory. The learner is unusable
// afterwards; Close is idempotent.
func (l *DeviceLearner) Close() error {
	var errs []error
	if l.graph != nil {
		errs = append(errs, l.graph.Close())
		l.graph = nil
	}
	for rg := range l.roundGraphs {
		errs = append(errs, rg.Close()) // their graphs replay this memory
	}
	if l.head != nil {
		errs = append(errs, l.head.Close())
		l.head = nil
	}
	for _, a := range l.mem {
		if err := l.be.Free(a); err != nil {
			errs = append(errs, err)
		}
	}
	l.mem, l.act, l.hyper, l.hyperArena = nil, nil, nil, nil
	return errors.Join(errs...)
}

// Config returns the learner's configuration.
func (l *DeviceLearner) Config() Config { return l.cfg }

// Steps returns the number of gradient steps taken.
func (l *DeviceLearner) Steps() int64 { return l.steps }

// SetLearningRate sets Adam's learning rate for the next steps (finite,
// at least 0; else a *FieldError and nothing changes).
func (l *DeviceLearner) SetLearningRate(lr float64) error {
	if !(lr >= 0) || math.IsInf(lr, 1) {
		return fieldErr("LearningRate", lr, "a finite number at least 0")
	}
	l.lr = lr
	return nil
}

// UpdateTarget copies the online network into the target network: one
// device-to-device copy queued on the backend's stream.
func (l *DeviceLearner) UpdateTarget() error {
	if err := l.be.Copy(l.targArena, 0, l.paramArena, 0, 4*int64(l.nparam)); err != nil {
		return fmt.Errorf("dqn: target update: %w", err)
	}
	return nil
}

// Priorities returns the float32 [BatchSize] device tensor that each
// TrainStep fills with |TD| + PriorityEpsilon (0 for masked
// transitions), for Table.UpdatePrioritiesDevice with the batch's keys
// (the update reads it in stream order on the same backend; the next
// TrainStep overwrites it).
func (l *DeviceLearner) Priorities() *tensor.Dense { return l.prio }

// TD returns the float32 [BatchSize] device tensor of the last step's TD
// errors, Q(s,a) minus the target.
func (l *DeviceLearner) TD() *tensor.Dense { return l.td }
