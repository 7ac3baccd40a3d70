package driver

import (
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/trajring/trajring/tensorbuf"
	"gorgonia.org/tensor"
)

// RandomPolicy picks every action element uniformly at random within its
// field's bounds: integers (Int32, Int64, Uint8) uniformly in [Min, Max]
// inclusive, floats (Float32, Float64) uniformly in [Min, Max), and Bool
// fields as fair coins. It is stateless (InitialState returns nil), has no
// policy info, and draws from one PCG stream seeded at construction, row
// by row in row-major order, so a seed reproduces the same actions.
//
// The PolicyStep it returns and its action tensors are reused: they stay
// valid until the next Action call. A RandomPolicy is not safe for
// concurrent use.
type RandomPolicy struct {
	spec  []tensorbuf.Field
	lo    [][]float64 // per field, per element
	hi    [][]float64
	rng   *rand.Rand
	batch int
	ps    PolicyStep
}

// NewRandomPolicy returns a uniform random policy over an action spec.
// Every integer and float field needs finite Min and Max bounds (one value
// or one per element) with Min <= Max, and integer bounds must be integers
// that fit the dtype (Int64: within ±2^61); float bounds must have a finite
// difference; otherwise it returns an error wrapping ErrSpec.
func NewRandomPolicy(actionSpec []tensorbuf.Field, seed uint64) (*RandomPolicy, error) {
	if err := checkSpec(actionSpec); err != nil {
		return nil, err
	}
	p := &RandomPolicy{
		spec: actionSpec,
		lo:   make([][]float64, len(actionSpec)),
		hi:   make([][]float64, len(actionSpec)),
		rng:  rand.New(rand.NewPCG(seed, 0x7472616a72696e67)), // "trajring"
	}
	for i, f := range actionSpec {
		if f.DType == tensorbuf.Bool {
			continue
		}
		n := f.Elems()
		p.lo[i], p.hi[i] = make([]float64, n), make([]float64, n)
		var dmin, dmax float64
		integer := true
		switch f.DType {
		case tensorbuf.Int32:
			dmin, dmax = math.MinInt32, math.MaxInt32
		case tensorbuf.Int64:
			// Keep hi-lo+1 inside int64.
			dmin, dmax = -(1 << 61), 1<<61
		case tensorbuf.Uint8:
			dmin, dmax = 0, math.MaxUint8
		default:
			integer = false
			dmin, dmax = -math.MaxFloat64, math.MaxFloat64
			if f.DType == tensorbuf.Float32 {
				dmin, dmax = -math.MaxFloat32, math.MaxFloat32
			}
		}
		if len(f.Min) == 0 || len(f.Max) == 0 {
			return nil, fmt.Errorf("%w: action %q needs Min and Max bounds for a random policy", ErrSpec, f.Name)
		}
		for e := range n {
			lo, hi := Bounds(f, e)
			if math.IsNaN(lo) || math.IsNaN(hi) || lo < dmin || hi > dmax || lo > hi || math.IsInf(hi-lo, 0) {
				return nil, fmt.Errorf("%w: action %q element %d: bounds [%v, %v] unusable for %v", ErrSpec, f.Name, e, lo, hi, f.DType)
			}
			if integer && (lo != math.Trunc(lo) || hi != math.Trunc(hi)) {
				return nil, fmt.Errorf("%w: action %q element %d: bounds [%v, %v] are not integers", ErrSpec, f.Name, e, lo, hi)
			}
			p.lo[i][e], p.hi[i][e] = lo, hi
		}
	}
	return p, nil
}

// InitialState returns nil: the policy is stateless.
func (p *RandomPolicy) InitialState(int) any { return nil }

// InfoSpec returns nil: the policy has no policy info.
func (p *RandomPolicy) InfoSpec() []tensorbuf.Field { return nil }

// ActionSpec returns the action spec the policy samples.
func (p *RandomPolicy) ActionSpec() []tensorbuf.Field { return p.spec }

// Action fills one random action per row of ts (the batch size is
// len(ts.StepType)) and returns it with the state unchanged.
func (p *RandomPolicy) Action(ts *TimeStep, state any) (*PolicyStep, error) {
	if ts == nil || len(ts.StepType) == 0 {
		return nil, fmt.Errorf("%w: random policy needs a time step with at least one row", ErrSpec)
	}
	if b := len(ts.StepType); b != p.batch {
		act, err := NewTensors(p.spec, b)
		if err != nil {
			return nil, err
		}
		p.batch, p.ps.Action = b, act
	}
	for i, f := range p.spec {
		p.fill(i, f, p.ps.Action[f.Name])
	}
	p.ps.State = state
	return &p.ps, nil
}

func (p *RandomPolicy) fill(i int, f tensorbuf.Field, d *tensor.Dense) {
	lo, hi := p.lo[i], p.hi[i]
	n := len(lo)
	r := p.rng
	switch f.DType {
	case tensorbuf.Int32:
		xs := d.Int32s()
		for j := range xs {
			e := j % n
			xs[j] = int32(int64(lo[e]) + r.Int64N(int64(hi[e]-lo[e])+1))
		}
	case tensorbuf.Int64:
		xs := d.Int64s()
		for j := range xs {
			e := j % n
			xs[j] = int64(lo[e]) + r.Int64N(int64(hi[e])-int64(lo[e])+1)
		}
	case tensorbuf.Uint8:
		xs := d.Uint8s()
		for j := range xs {
			e := j % n
			xs[j] = uint8(int64(lo[e]) + r.Int64N(int64(hi[e]-lo[e])+1))
		}
	case tensorbuf.Float32:
		xs := d.Float32s()
		for j := range xs {
			e := j % n
			v := float32(lo[e] + r.Float64()*(hi[e]-lo[e]))
			if v >= float32(hi[e]) && hi[e] > lo[e] {
				v = math.Nextafter32(float32(hi[e]), float32(lo[e]))
			}
			xs[j] = v
		}
	case tensorbuf.Float64:
		xs := d.Float64s()
		for j := range xs {
			e := j % n
			v := lo[e] + r.Float64()*(hi[e]-lo[e])
			if v >= hi[e] && hi[e] > lo[e] {
				v = math.Nextafter(hi[e], lo[e])
			}
			xs[j] = v
		}
	case tensorbuf.Bool:
		xs := d.Bools()
		for j := range xs {
			xs[j] = r.Uint64()&1 == 1
		}
	}
}
