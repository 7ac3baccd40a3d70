package driver_test

import (
	"fmt"
	"slices"
	"strings"

	"github.com/trajring/trajring/driver"
	"github.com/trajring/trajring/driver/envs"
	"github.com/trajring/trajring/tensorbuf"
	"gorgonia.org/tensor"
)

// countPolicy is a stateful policy for the Counting environment: its state
// is the number of Action calls so far (an int), and row r's action is
// 10*r + state (mod 1000), so actions reveal whether the state was carried.
type countPolicy struct {
	spec  []tensorbuf.Field
	ps    driver.PolicyStep
	calls int // Action calls, including failed ones
	// failAt makes the Action call with this state fail (if >= 0).
	failAt int
}

var errPolicy = fmt.Errorf("test policy failure")

func newCountPolicy(env driver.Environment) *countPolicy {
	act, err := driver.NewTensors(env.ActionSpec(), env.BatchSize())
	if err != nil {
		panic(err)
	}
	return &countPolicy{spec: env.ActionSpec(), ps: driver.PolicyStep{Action: act}, failAt: -1}
}

func (p *countPolicy) InitialState(int) any        { return 0 }
func (p *countPolicy) InfoSpec() []tensorbuf.Field { return nil }
func (p *countPolicy) Action(ts *driver.TimeStep, state any) (*driver.PolicyStep, error) {
	p.calls++
	n := state.(int)
	if n == p.failAt {
		return nil, errPolicy
	}
	a := p.ps.Action[envs.CountActionName].Int64s()
	for r := range a {
		a[r] = int64((10*r + n) % 1000)
	}
	p.ps.State = n + 1
	return &p.ps, nil
}

// constPolicy returns the same zero actions every step (for overhead
// measurements).
type constPolicy struct{ ps driver.PolicyStep }

func newConstPolicy(env driver.Environment) *constPolicy {
	act, err := driver.NewTensors(env.ActionSpec(), env.BatchSize())
	if err != nil {
		panic(err)
	}
	return &constPolicy{ps: driver.PolicyStep{Action: act}}
}

func (p *constPolicy) InitialState(int) any        { return nil }
func (p *constPolicy) InfoSpec() []tensorbuf.Field { return nil }
func (p *constPolicy) Action(*driver.TimeStep, any) (*driver.PolicyStep, error) {
	return &p.ps, nil
}

// step is one row of one observed Counting trajectory.
type step struct {
	Count        int64 // observation "count" at t
	Type, Next   tensorbuf.StepType
	Action       int64
	Reward, Disc float32
}

func (s step) String() string {
	return fmt.Sprintf("{%d %v->%v a=%d r=%g d=%g}", s.Count, s.Type, s.Next, s.Action, s.Reward, s.Disc)
}

// recorder keeps, per row, the active Counting trajectory rows it observed.
type recorder struct {
	rows [][]step
	n    int // Observe calls
}

func (r *recorder) Observe(t *driver.Trajectory) error {
	r.n++
	if r.rows == nil {
		r.rows = make([][]step, t.BatchSize())
	}
	count := t.Observation[envs.CountName].Int64s()
	act := t.Action[envs.CountActionName].Int64s()
	for i := range t.StepType {
		if !t.IsActive(i) {
			continue
		}
		r.rows[i] = append(r.rows[i], step{count[i], t.StepType[i], t.NextStepType[i], act[i], t.Reward[i], t.Discount[i]})
	}
	return nil
}

// counts returns the observed counts of row i.
func (r *recorder) counts(i int) []int64 {
	if r.rows == nil {
		return nil
	}
	var c []int64
	for _, s := range r.rows[i] {
		c = append(c, s.Count)
	}
	return c
}

// types returns row i's observed step types as a string like "FMML".
func (r *recorder) types(i int) string {
	var b strings.Builder
	for _, s := range r.rows[i] {
		b.WriteString(s.Type.String())
	}
	return b.String()
}

func countOf(ts *driver.TimeStep) []int64 {
	return slices.Clone(ts.Observation[envs.CountName].Int64s())
}

func mustCounting(lengths ...int) *envs.Counting {
	env, err := envs.NewCounting(lengths...)
	if err != nil {
		panic(err)
	}
	return env
}

func int64Tensor(vals ...int64) *tensor.Dense {
	return tensor.New(tensor.WithBacking(vals), tensor.WithShape(len(vals)))
}
