// Package dqn is a deep Q-network learner on gorgonia.org/gorgonia (its
// CPU engine), fed from a trajring table: an MLP Q-network, a target
// network, Adam, the Huber loss, double DQN, importance weights and
// priority updates from the TD errors, and n-step targets (the table's
// transitions carry the n-step reward sums and gamma^k discounts).
//
// The training step is one gorgonia graph built once for a batch size
// (forward pass, loss, gradients) run by one TapeMachine; inputs are
// bound with gorgonia.Let to tensors the agent owns and refills from the
// batch each step. Batches go into gorgonia as contiguous per-field
// tensors: gorgonia reads a tensor's backing array and ignores strides,
// so strided views (a Dense.Slice of a sequence batch) would silently
// give wrong numbers. Targets and greedy actions use the same weights in
// a plain-Go forward pass, which avoids a second graph and gorgonia's
// per-op overhead at batch size 1. Both multiply matrices with
// internal/sgemm (AVX2/FMA and AVX-512 kernels on amd64), which the
// package puts behind gorgonia with gorgonia.Use when it is loaded:
// gonum's float32 GEMM, gorgonia's default, has no vector instructions
// and was most of a training step's time. A layer's bias and ReLU are
// internal/nnops's fused ops, and Adam's loop is internal/adamstep's.
//
// gorgonia's own CUDA engine creates its own CUDA context and needs
// cuDNN, so it cannot read trajring's device memory: FromTransitions
// brings tensors that are not host memory to the host through the
// backend's device-to-host path (Transitions.Host) and the learner runs
// on the CPU. gorgonia reads the same cuda build tag as trajring to turn
// that engine on, so this package (and trajring train) is built only
// without the tag until cuDNN is available.
package dqn

import (
	"errors"
	"fmt"
	"io"
	"math"

	"github.com/trajring/trajring/driver"
	"github.com/trajring/trajring/internal/nnops"
	"github.com/trajring/trajring/internal/sgemm"
	"github.com/trajring/trajring/tensorbuf"
	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// init makes gorgonia (and its tensor package) multiply float32
// matrices with internal/sgemm; it runs before any graph can, since
// gorgonia's BLAS is a process-wide variable read without a lock.
func init() { gorgonia.Use(sgemm.Implementation{}) }

// ErrConfig reports a bad configuration or input.
var ErrConfig = errors.New("dqn: invalid configuration")

// Config configures an Agent. It is a plain value; New copies it. Every
// field is used as given (zero means zero, and a zero that makes no sense
// is refused): start from DefaultConfig and change what differs, so that
// a value the caller chose is never replaced behind its back.
type Config struct {
	// ObsDim is the size of a flattened observation; NumActions the
	// number of discrete actions.
	ObsDim, NumActions int
	// Hidden are the hidden layer sizes (empty: a linear Q-function).
	Hidden []int
	// BatchSize is the batch of every training step (at least 1).
	BatchSize int
	// LearningRate of Adam (positive and finite).
	LearningRate float64
	// MaxGradNorm clips the global gradient norm (SB3's max_grad_norm;
	// positive, or negative for no clipping: clipping to 0 would stop
	// learning, so 0 is refused).
	MaxGradNorm float64
	// DoubleDQN picks the next action with the online network and values
	// it with the target network (van Hasselt et al.).
	DoubleDQN bool
	// PriorityEpsilon is added to |TD| for new priorities (at least 0).
	PriorityEpsilon float64
	// Seed seeds the weights.
	Seed uint64
}

// DefaultConfig returns RL Baselines3 Zoo's CartPole-v1 network and
// optimizer settings (hyperparams/dqn.yml: MLP 256x256, lr 2.3e-3, batch
// 64, SB3's max_grad_norm 10) with double DQN; ObsDim and NumActions are
// left 0 for the caller (RunCartPole sets them from the environment).
// Each call returns a new value; it is safe for concurrent use.
func DefaultConfig() Config {
	return Config{Hidden: []int{256, 256}, BatchSize: 64, LearningRate: 2.3e-3, MaxGradNorm: 10, DoubleDQN: true,
		PriorityEpsilon: 1e-6}
}

// FieldError is a configuration field whose value is out of range. It
// wraps ErrConfig; Field is the Go name of the field ("Agent.BatchSize"
// inside a TrainConfig), so that a command line can name its own flag.
// A plain value, safe for concurrent reads.
type FieldError struct {
	Field string
	Value any
	Want  string // what would be accepted, e.g. "at least 1"
}

// Error names the field, its value and what would be accepted.
func (e *FieldError) Error() string {
	return fmt.Sprintf("%v: %s %v: want %s", ErrConfig, e.Field, e.Value, e.Want)
}

// Unwrap returns ErrConfig.
func (e *FieldError) Unwrap() error { return ErrConfig }

func fieldErr(field string, v any, want string) error {
	return &FieldError{Field: field, Value: v, Want: want}
}

// validate checks every field but ObsDim and NumActions (when dims is
// false: RunCartPole sets those from the environment).
func (c *Config) validate(prefix string, dims bool) error {
	switch {
	case dims && c.ObsDim < 1:
		return fieldErr(prefix+"ObsDim", c.ObsDim, "at least 1")
	case dims && c.NumActions < 1:
		return fieldErr(prefix+"NumActions", c.NumActions, "at least 1")
	case c.BatchSize < 1:
		return fieldErr(prefix+"BatchSize", c.BatchSize, "at least 1")
	case !(c.LearningRate > 0) || math.IsInf(c.LearningRate, 1):
		return fieldErr(prefix+"LearningRate", c.LearningRate, "a positive finite number")
	case c.MaxGradNorm == 0 || math.IsNaN(c.MaxGradNorm):
		return fieldErr(prefix+"MaxGradNorm", c.MaxGradNorm, "a positive norm, or negative for no clipping")
	case !(c.PriorityEpsilon >= 0) || math.IsInf(c.PriorityEpsilon, 1):
		return fieldErr(prefix+"PriorityEpsilon", c.PriorityEpsilon, "a finite number at least 0")
	}
	for _, h := range c.Hidden {
		if h < 1 || h > maxLayer {
			return fieldErr(prefix+"Hidden", c.Hidden, fmt.Sprintf("layer sizes from 1 to %d", maxLayer))
		}
	}
	return nil
}

// maxLayer bounds a layer's size, so that its weight matrices' sizes
// cannot overflow before the memory check sees them.
const maxLayer = 1 << 24

// Batch is a training batch in host memory, every field contiguous:
// Obs and NextObs [BatchSize*ObsDim], the rest [BatchSize]. Discount is
// the factor of the bootstrap value (gamma^k, 0 after a termination);
// Weights the per-transition loss weights (importance weights times the
// validity mask). Train writes the TD errors to TD.
type Batch struct {
	Obs, NextObs              []float32
	Actions                   []int64
	Reward, Discount, Weights []float32
	TD                        []float32
}

// NewBatch returns a Batch sized for the agent's configuration.
func (a *Agent) NewBatch() *Batch {
	b, d := a.cfg.BatchSize, a.cfg.ObsDim
	return &Batch{
		Obs: make([]float32, b*d), NextObs: make([]float32, b*d), Actions: make([]int64, b),
		Reward: make([]float32, b), Discount: make([]float32, b), Weights: make([]float32, b), TD: make([]float32, b),
	}
}

// Agent is a DQN learner. It is not safe for concurrent use.
type Agent struct {
	cfg    Config
	dims   []int
	g      *gorgonia.ExprGraph
	vm     gorgonia.VM
	opt    *adam
	params gorgonia.Nodes // w0, b0, w1, b1, ...
	ws, gs [][]float32    // scratch: the parameters' values and gradients
	// inputs and the tensors bound to them
	x, onehot, y, w     *gorgonia.Node
	xT, onehotT, yT, wT *tensor.Dense
	lossV, tdV          gorgonia.Value
	target              *mlp
	online              mlp // views of the graph's weight tensors
	scratch             [][]float32
	qn, qt              []float32
	steps               int64
}

// New builds the agent's graph and networks (the target starts equal to
// the online network). A bad configuration returns a *FieldError
// (ErrConfig).
func New(cfg Config) (*Agent, error) {
	if err := cfg.validate("", true); err != nil {
		return nil, err
	}
	cfg.Hidden = append([]int(nil), cfg.Hidden...)
	a := &Agent{cfg: cfg}
	a.dims = append(append([]int{cfg.ObsDim}, cfg.Hidden...), cfg.NumActions)
	init := newMLP(a.dims, cfg.Seed)
	if err := a.build(init); err != nil {
		return nil, err
	}
	a.target = newMLP(a.dims, 0)
	a.target.copyFrom(&a.online)
	return a, nil
}

func (a *Agent) build(init *mlp) (err error) {
	defer func() {
		// gorgonia's constructors panic on misuse (Must); keep panics
		// from crossing the API.
		if r := recover(); r != nil {
			err = fmt.Errorf("%w: building the graph: %v", ErrConfig, r)
		}
	}()
	B, f32 := a.cfg.BatchSize, tensor.Float32
	g := gorgonia.NewGraph()
	a.g = g
	a.xT = tensor.New(tensor.WithShape(B, a.cfg.ObsDim), tensor.Of(f32))
	a.onehotT = tensor.New(tensor.WithShape(B, a.cfg.NumActions), tensor.Of(f32))
	a.yT = tensor.New(tensor.WithShape(B), tensor.Of(f32))
	a.wT = tensor.New(tensor.WithShape(B), tensor.Of(f32))
	a.x = gorgonia.NewMatrix(g, f32, gorgonia.WithShape(B, a.cfg.ObsDim), gorgonia.WithName("obs"), gorgonia.WithValue(a.xT))
	a.onehot = gorgonia.NewMatrix(g, f32, gorgonia.WithShape(B, a.cfg.NumActions), gorgonia.WithName("onehot"), gorgonia.WithValue(a.onehotT))
	a.y = gorgonia.NewVector(g, f32, gorgonia.WithShape(B), gorgonia.WithName("target"), gorgonia.WithValue(a.yT))
	a.w = gorgonia.NewVector(g, f32, gorgonia.WithShape(B), gorgonia.WithName("weight"), gorgonia.WithValue(a.wT))
	h := a.x
	a.online.dims = a.dims
	for l := range init.w {
		k, m := a.dims[l], a.dims[l+1]
		wt := tensor.New(tensor.WithShape(k, m), tensor.WithBacking(init.w[l]))
		bt := tensor.New(tensor.WithShape(1, m), tensor.WithBacking(init.b[l]))
		wn := gorgonia.NewMatrix(g, f32, gorgonia.WithShape(k, m), gorgonia.WithName(fmt.Sprintf("w%d", l)), gorgonia.WithValue(wt))
		bn := gorgonia.NewMatrix(g, f32, gorgonia.WithShape(1, m), gorgonia.WithName(fmt.Sprintf("b%d", l)), gorgonia.WithValue(bt))
		a.params = append(a.params, wn, bn)
		// Bias and ReLU are one op each way (internal/nnops): gorgonia's
		// BroadcastAdd and Rectify take several passes and tensors.
		mul, bias := gorgonia.Must(gorgonia.Mul(h, wn)), nnops.BiasAdd
		if l+1 < len(init.w) {
			bias = nnops.BiasReLU
		}
		z, err := bias(mul, bn)
		if err != nil {
			return fmt.Errorf("%w: layer %d: %w", ErrConfig, l, err)
		}
		h = z
	}
	qsa := gorgonia.Must(gorgonia.Sum(gorgonia.Must(gorgonia.HadamardProd(h, a.onehot)), 1))
	td := gorgonia.Must(gorgonia.Sub(qsa, a.y))
	// Huber (delta 1) from differentiable pieces: with r = relu(|td|-1)
	// and c = |td| - r = min(|td|, 1), huber = c^2/2 + r.
	abs := gorgonia.Must(gorgonia.Abs(td))
	one := gorgonia.NewConstant(float32(1))
	half := gorgonia.NewConstant(float32(0.5))
	r := gorgonia.Must(gorgonia.Rectify(gorgonia.Must(gorgonia.Sub(abs, one))))
	c := gorgonia.Must(gorgonia.Sub(abs, r))
	huber := gorgonia.Must(gorgonia.Add(gorgonia.Must(gorgonia.Mul(gorgonia.Must(gorgonia.Square(c)), half)), r))
	loss := gorgonia.Must(gorgonia.Mean(gorgonia.Must(gorgonia.HadamardProd(huber, a.w))))
	gorgonia.Read(loss, &a.lossV)
	gorgonia.Read(td, &a.tdV)
	if _, err := gorgonia.Grad(loss, a.params...); err != nil {
		return fmt.Errorf("%w: gradients: %w", ErrConfig, err)
	}
	a.vm = gorgonia.NewTapeMachine(g, gorgonia.BindDualValues(a.params...))
	sizes := make([]int, len(a.params))
	for i, p := range a.params {
		sizes[i] = p.Shape().TotalSize()
	}
	a.opt = newAdam(a.cfg.LearningRate, sizes)
	a.refreshOnline()
	return nil
}

// refreshOnline points the plain-Go view of the online network at the
// graph's current weight tensors (Adam updates them in place; this keeps
// the view right should a graph run ever replace them).
func (a *Agent) refreshOnline() {
	a.online.w, a.online.b = a.online.w[:0], a.online.b[:0]
	for i, p := range a.params {
		d := p.Value().Data().([]float32)
		if i%2 == 0 {
			a.online.w = append(a.online.w, d)
		} else {
			a.online.b = append(a.online.b, d)
		}
	}
}

// Config returns the agent's configuration.
func (a *Agent) Config() Config { return a.cfg }

// Steps returns the number of gradient steps taken.
func (a *Agent) Steps() int64 { return a.steps }

// QValues writes the online network's Q-values of n observations (row-
// major [n, ObsDim]) to q ([n, NumActions]).
func (a *Agent) QValues(obs []float32, n int, q []float32) error {
	if n < 1 || len(obs) < n*a.cfg.ObsDim || len(q) < n*a.cfg.NumActions {
		return fmt.Errorf("%w: %d observations in %d values, %d Q-values", ErrConfig, n, len(obs), len(q))
	}
	a.scratch = forward(a.dims, a.online.w, a.online.b, obs, n, q[:n*a.cfg.NumActions], a.scratch)
	return nil
}

// QFunc returns a driver.QFunc over the observation field name (float32,
// flattened to ObsDim values per row), for driver.NewEpsilonGreedyPolicy.
func (a *Agent) QFunc(name string) driver.QFunc {
	return func(obs map[string]*tensor.Dense, q []float32) error {
		d, ok := obs[name]
		if !ok || d.Dtype() != tensor.Float32 || d.Shape().TotalSize()%a.cfg.ObsDim != 0 {
			return fmt.Errorf("%w: observation %q missing or not float32 of %d per row", ErrConfig, name, a.cfg.ObsDim)
		}
		xs := d.Float32s()
		return a.QValues(xs, len(xs)/a.cfg.ObsDim, q)
	}
}

// SetLearningRate sets Adam's learning rate for the next steps (a
// schedule's current value; at least 0 and finite, else ErrConfig and
// nothing changes). Config keeps the initial rate. Like Train, it is
// not safe for concurrent use.
func (a *Agent) SetLearningRate(lr float64) error {
	if !(lr >= 0) || math.IsInf(lr, 1) {
		return fieldErr("LearningRate", lr, "a finite number at least 0")
	}
	a.opt.lr = lr
	return nil
}

// LearningRate returns Adam's current learning rate.
func (a *Agent) LearningRate() float64 { return a.opt.lr }

// UpdateTarget copies the online network into the target network.
func (a *Agent) UpdateTarget() { a.target.copyFrom(&a.online) }

// targets sets the regression targets y = r + discount * Q_target(s', a*)
// with a* the argmax of the online (double DQN) or target network.
func (a *Agent) targets(b *Batch) {
	B, nA := a.cfg.BatchSize, a.cfg.NumActions
	a.qt = grow(a.qt, B*nA)
	a.scratch = forward(a.dims, a.target.w, a.target.b, b.NextObs, B, a.qt, a.scratch)
	sel := a.qt
	if a.cfg.DoubleDQN {
		a.qn = grow(a.qn, B*nA)
		a.scratch = forward(a.dims, a.online.w, a.online.b, b.NextObs, B, a.qn, a.scratch)
		sel = a.qn
	}
	y := a.yT.Float32s()
	for i := range B {
		row := sel[i*nA : (i+1)*nA]
		best := 0
		for j := 1; j < nA; j++ {
			if row[j] > row[best] {
				best = j
			}
		}
		y[i] = b.Reward[i] + b.Discount[i]*a.qt[i*nA+best]
	}
}

func grow(s []float32, n int) []float32 {
	if cap(s) < n {
		return make([]float32, n)
	}
	return s[:n]
}

// load copies a batch into the graph's input tensors and computes the
// targets.
func (a *Agent) load(b *Batch) error {
	B, d, nA := a.cfg.BatchSize, a.cfg.ObsDim, a.cfg.NumActions
	if len(b.Obs) != B*d || len(b.NextObs) != B*d || len(b.Actions) != B || len(b.Reward) != B || len(b.Discount) != B ||
		len(b.Weights) != B || len(b.TD) != B {
		return fmt.Errorf("%w: batch sizes do not match batch %d, observation %d", ErrConfig, B, d)
	}
	copy(a.xT.Float32s(), b.Obs)
	oh := a.onehotT.Float32s()
	clear(oh)
	for i, act := range b.Actions {
		if act < 0 || act >= int64(nA) {
			return fmt.Errorf("%w: action %d of %d", ErrConfig, act, nA)
		}
		oh[i*nA+int(act)] = 1
	}
	copy(a.wT.Float32s(), b.Weights)
	a.targets(b)
	return nil
}

// lossAndGrad runs the graph on a loaded batch: loss, TD errors and the
// gradients of the parameters.
func (a *Agent) lossAndGrad() (float64, error) {
	a.vm.Reset()
	if err := a.vm.RunAll(); err != nil {
		return 0, fmt.Errorf("dqn: running the graph: %w", err)
	}
	return float64(a.lossV.Data().(float32)), nil
}

// Train takes one gradient step on b (Adam, after clipping the global
// gradient norm) and writes the TD errors (Q(s,a) - target) to b.TD. It
// returns the weighted Huber loss before the step.
func (a *Agent) Train(b *Batch) (loss float64, err error) {
	if err := a.load(b); err != nil {
		return 0, err
	}
	if loss, err = a.lossAndGrad(); err != nil {
		return 0, err
	}
	copy(b.TD, a.tdV.Data().([]float32))
	if a.cfg.MaxGradNorm > 0 {
		var sq float64
		for _, p := range a.params {
			gv, _ := p.Grad()
			for _, v := range gv.Data().([]float32) {
				sq += float64(v) * float64(v)
			}
		}
		if norm := math.Sqrt(sq); norm > a.cfg.MaxGradNorm {
			s := float32(a.cfg.MaxGradNorm / (norm + 1e-6))
			for _, p := range a.params {
				gv, _ := p.Grad()
				xs := gv.Data().([]float32)
				for i := range xs {
					xs[i] *= s
				}
			}
		}
	}
	a.ws, a.gs = a.ws[:0], a.gs[:0]
	for _, p := range a.params {
		gv, err := p.Grad()
		if err != nil {
			return 0, fmt.Errorf("dqn: gradient of %s: %w", p.Name(), err)
		}
		a.ws = append(a.ws, p.Value().Data().([]float32))
		a.gs = append(a.gs, gv.Data().([]float32))
	}
	a.opt.step(a.ws, a.gs)
	a.refreshOnline()
	a.steps++
	return loss, nil
}

// Priorities writes |TD| + PriorityEpsilon of the last trained batch to
// p, 0 where the batch weight is 0 (an invalid transition).
func (a *Agent) Priorities(b *Batch, p []float32) {
	for i, td := range b.TD {
		p[i] = 0
		if b.Weights[i] != 0 {
			p[i] = float32(math.Abs(float64(td)) + a.cfg.PriorityEpsilon)
		}
	}
}

// FromTransitions fills b from table transitions (contiguous per-field
// tensors): observation field obs (float32, ObsDim per row), action
// field act (an integer scalar), rewards, discounts and masked
// importance weights. Tensors that are not host memory (cuda builds) are
// first copied to the host through the backend's download path.
func (a *Agent) FromTransitions(b *Batch, tr *tensorbuf.TableTransitions, obs, act string) error {
	src := &tr.Transitions
	if o, ok := src.Observation[obs]; ok && !o.IsNativelyAccessible() {
		h, err := src.Host()
		if err != nil {
			return err
		}
		defer h.Release()
		src = h
	}
	if len(tr.Rows) != a.cfg.BatchSize {
		return fmt.Errorf("%w: %d transitions for a batch of %d", ErrConfig, len(tr.Rows), a.cfg.BatchSize)
	}
	o, on := src.Observation[obs], src.NextObservation[obs]
	ac := src.Action[act]
	if o == nil || on == nil || ac == nil || o.Dtype() != tensor.Float32 || o.Shape().TotalSize() != len(b.Obs) {
		return fmt.Errorf("%w: observation %q (float32, %d per row) or action %q missing", ErrConfig, obs, a.cfg.ObsDim, act)
	}
	copy(b.Obs, o.Float32s())
	copy(b.NextObs, on.Float32s())
	switch ac.Dtype() {
	case tensor.Int64:
		copy(b.Actions, ac.Int64s())
	case tensor.Int32:
		for i, v := range ac.Int32s() {
			b.Actions[i] = int64(v)
		}
	case tensor.Uint8:
		for i, v := range ac.Uint8s() {
			b.Actions[i] = int64(v)
		}
	default:
		return fmt.Errorf("%w: action %q of dtype %v", ErrConfig, act, ac.Dtype())
	}
	copy(b.Reward, src.Reward.Float32s())
	copy(b.Discount, src.Discount.Float32s())
	b.Weights = tr.MaskedWeights32(b.Weights)
	return nil
}

// Save writes the online network: a versioned header with a CRC-32C,
// then the layer sizes and weights (gob); see ReadNetwork.
func (a *Agent) Save(w io.Writer) error { return a.online.save(w) }

// LoadNetwork reads a network written by Save, and refuses what
// ReadNetwork refuses, and returns a Q function over it (for evaluation
// without training), with its layer sizes.
func LoadNetwork(r io.Reader) (q func(obs []float32, n int, q []float32), dims []int, err error) {
	m, err := loadMLP(r)
	if err != nil {
		return nil, nil, err
	}
	var scratch [][]float32
	return func(obs []float32, n int, q []float32) {
		scratch = forward(m.dims, m.w, m.b, obs, n, q, scratch)
	}, m.dims, nil
}
