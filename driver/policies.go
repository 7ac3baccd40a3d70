package driver

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/trajring/trajring/tensorbuf"
	"gorgonia.org/tensor"
)

// PolicyFunc adapts a function to a stateless Policy without policy info
// (as http.HandlerFunc adapts a function to a Handler): InitialState
// returns nil and InfoSpec nil. It is as safe for concurrent use as the
// function.
type PolicyFunc func(ts *TimeStep, state any) (*PolicyStep, error)

// Action calls f.
func (f PolicyFunc) Action(ts *TimeStep, state any) (*PolicyStep, error) { return f(ts, state) }

// InitialState returns nil.
func (f PolicyFunc) InitialState(int) any { return nil }

// InfoSpec returns nil.
func (f PolicyFunc) InfoSpec() []tensorbuf.Field { return nil }

// QFunc writes the action values of a batch of observations (each
// [B, ...shape]) to q, row-major [B, numActions]. A Q-network's forward
// pass is one.
type QFunc func(obs map[string]*tensor.Dense, q []float32) error

// LinearSchedule goes linearly from Start to End over Steps steps and
// stays at End after (SB3's get_linear_fn, TF-Agents'
// polynomial_decay with power 1). It is a plain value.
type LinearSchedule struct {
	Start, End float64
	Steps      int64
}

// At returns the value at step t (Start for t <= 0; End once t >= Steps,
// and always when Steps <= 0).
func (s LinearSchedule) At(t int64) float64 {
	if s.Steps <= 0 || t >= s.Steps {
		return s.End
	}
	if t <= 0 {
		return s.Start
	}
	return s.Start + (s.End-s.Start)*float64(t)/float64(s.Steps)
}

// EpsilonGreedyPolicy picks, for every row independently, a uniformly
// random action with probability epsilon and the greedy action (the
// first index of the largest Q-value) otherwise, as TF-Agents'
// EpsilonGreedyPolicy does over a QPolicy. The action is one integer
// field (Int32, Int64 or Uint8, scalar) with Min 0 and Max numActions-1.
// Epsilon follows a LinearSchedule over the env steps the policy has
// acted on (each Action call counts its batch size, as SB3 counts
// timesteps); a constant epsilon is a schedule with Steps 0, and
// NewGreedyPolicy is epsilon 0. Random draws come from one PCG stream
// seeded at construction (one uniform per row, then one action draw per
// exploring row), so a seed reproduces the actions.
//
// The policy is stateless and has no policy info. Its PolicyStep and
// action tensor are reused (valid until the next Action call), and once
// sized for a batch Action allocates nothing itself. It is not safe for
// concurrent use.
type EpsilonGreedyPolicy struct {
	q          QFunc
	spec       []tensorbuf.Field
	numActions int
	sched      LinearSchedule
	steps      int64
	rng        *rand.Rand
	pcg        *rand.PCG // rng's source, for MarshalBinary
	values     []float32
	batch      int
	ps         PolicyStep
}

// NewGreedyPolicy returns the greedy policy over q (epsilon 0): action
// field name of dtype (Int32, Int64 or Uint8), numActions >= 1 actions.
// It returns an error wrapping ErrSpec for a bad field or count, or
// ErrConfig for a nil q.
func NewGreedyPolicy(name string, dtype tensorbuf.DType, numActions int, q QFunc) (*EpsilonGreedyPolicy, error) {
	return NewEpsilonGreedyPolicy(name, dtype, numActions, q, LinearSchedule{}, 0)
}

// NewEpsilonGreedyPolicy returns an epsilon-greedy policy over q (see
// EpsilonGreedyPolicy) with epsilon following sched, seeded with seed.
// Schedule values must lie in [0, 1] (ErrConfig).
func NewEpsilonGreedyPolicy(name string, dtype tensorbuf.DType, numActions int, q QFunc, sched LinearSchedule, seed uint64) (*EpsilonGreedyPolicy, error) {
	if q == nil {
		return nil, fmt.Errorf("%w: nil Q function", ErrConfig)
	}
	if dtype != tensorbuf.Int32 && dtype != tensorbuf.Int64 && dtype != tensorbuf.Uint8 {
		return nil, fmt.Errorf("%w: greedy action %q must be an integer, not %v", ErrSpec, name, dtype)
	}
	if numActions < 1 || dtype == tensorbuf.Uint8 && numActions > 256 || dtype == tensorbuf.Int32 && numActions > math.MaxInt32 {
		return nil, fmt.Errorf("%w: %d actions for %v", ErrSpec, numActions, dtype)
	}
	for _, v := range []float64{sched.Start, sched.End} {
		if !(v >= 0 && v <= 1) {
			return nil, fmt.Errorf("%w: epsilon schedule %+v outside [0, 1]", ErrConfig, sched)
		}
	}
	spec := []tensorbuf.Field{{Name: name, Role: tensorbuf.Action, DType: dtype, Min: []float64{0}, Max: []float64{float64(numActions - 1)}}}
	if err := checkSpec(spec); err != nil {
		return nil, err
	}
	pcg := rand.NewPCG(seed, 0x6570736772656564) // "epsgreed"
	return &EpsilonGreedyPolicy{q: q, spec: spec, numActions: numActions, sched: sched, rng: rand.New(pcg), pcg: pcg}, nil
}

// MarshalBinary returns the policy's resumable state: the schedule's
// clock and the state of its random source (to checkpoint a run).
func (p *EpsilonGreedyPolicy) MarshalBinary() ([]byte, error) {
	src, err := p.pcg.MarshalBinary()
	if err != nil {
		return nil, err
	}
	return binary.LittleEndian.AppendUint64(src, uint64(p.steps)), nil
}

// UnmarshalBinary restores a state written by MarshalBinary, so that the
// policy draws exactly what the marshalled one would have drawn next. A
// malformed state returns an error wrapping ErrConfig and changes
// nothing.
func (p *EpsilonGreedyPolicy) UnmarshalBinary(data []byte) error {
	if len(data) < 8 || int64(binary.LittleEndian.Uint64(data[len(data)-8:])) < 0 {
		return fmt.Errorf("%w: epsilon-greedy state of %d bytes", ErrConfig, len(data))
	}
	pcg := new(rand.PCG)
	if err := pcg.UnmarshalBinary(data[:len(data)-8]); err != nil {
		return fmt.Errorf("%w: epsilon-greedy random state: %w", ErrConfig, err)
	}
	*p.pcg = *pcg
	p.steps = int64(binary.LittleEndian.Uint64(data[len(data)-8:]))
	return nil
}

// InitialState returns nil: the policy is stateless.
func (p *EpsilonGreedyPolicy) InitialState(int) any { return nil }

// InfoSpec returns nil: the policy has no policy info.
func (p *EpsilonGreedyPolicy) InfoSpec() []tensorbuf.Field { return nil }

// ActionSpec returns the policy's one action field.
func (p *EpsilonGreedyPolicy) ActionSpec() []tensorbuf.Field { return p.spec }

// Steps returns the env steps acted on so far (the schedule's clock).
func (p *EpsilonGreedyPolicy) Steps() int64 { return p.steps }

// SetSteps sets the schedule's clock (to resume a run, say); negative
// values count as 0.
func (p *EpsilonGreedyPolicy) SetSteps(t int64) { p.steps = max(t, 0) }

// Epsilon returns the epsilon of the next Action call.
func (p *EpsilonGreedyPolicy) Epsilon() float64 { return p.sched.At(p.steps) }

// Action computes Q-values for ts's observations and picks one action per
// row. A failing Q function's error is returned wrapped, the clock
// unchanged.
func (p *EpsilonGreedyPolicy) Action(ts *TimeStep, state any) (*PolicyStep, error) {
	if ts == nil || len(ts.StepType) == 0 {
		return nil, fmt.Errorf("%w: greedy policy needs a time step with at least one row", ErrSpec)
	}
	b := len(ts.StepType)
	if b != p.batch {
		act, err := NewTensors(p.spec, b)
		if err != nil {
			return nil, err
		}
		p.batch, p.ps.Action = b, act
		p.values = make([]float32, b*p.numActions)
	}
	if err := p.q(ts.Observation, p.values); err != nil {
		return nil, fmt.Errorf("%w: Q function: %w", ErrPolicy, err)
	}
	eps := p.sched.At(p.steps)
	d := p.ps.Action[p.spec[0].Name]
	var i64 []int64
	var i32 []int32
	var u8 []uint8
	switch p.spec[0].DType {
	case tensorbuf.Int64:
		i64 = d.Int64s()
	case tensorbuf.Int32:
		i32 = d.Int32s()
	default:
		u8 = d.Uint8s()
	}
	for r := range b {
		a := argmax(p.values[r*p.numActions : (r+1)*p.numActions])
		if eps > 0 && p.rng.Float64() < eps {
			a = p.rng.IntN(p.numActions)
		}
		switch {
		case i64 != nil:
			i64[r] = int64(a)
		case i32 != nil:
			i32[r] = int32(a)
		default:
			u8[r] = uint8(a)
		}
	}
	p.steps += int64(b)
	p.ps.State = state
	return &p.ps, nil
}

// argmax returns the first index of the largest value (NaN never wins
// over a number).
func argmax(v []float32) int {
	best := 0
	for i := 1; i < len(v); i++ {
		if v[i] > v[best] || v[best] != v[best] && v[i] == v[i] {
			best = i
		}
	}
	return best
}
