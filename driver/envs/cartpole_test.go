package envs

import (
	"errors"
	"math"
	"slices"
	"testing"

	"github.com/trajring/trajring/driver"
	"github.com/trajring/trajring/tensorbuf"
	"gorgonia.org/tensor"
)

func actions(vals ...int64) map[string]*tensor.Dense {
	return map[string]*tensor.Dense{CartPoleActionName: tensor.New(tensor.WithBacking(vals), tensor.WithShape(len(vals)))}
}

func obsRow(ts *driver.TimeStep, r int) []float32 {
	return slices.Clone(ts.Observation[CartPoleObservationName].Float32s()[4*r : 4*r+4])
}

func f32s(v ...float64) []float32 {
	out := make([]float32, len(v))
	for i, x := range v {
		out[i] = float32(x)
	}
	return out
}

func newCartPole(t *testing.T, n int, seed uint64) *CartPole {
	t.Helper()
	c, err := NewCartPole(n, seed)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Reset(); err != nil {
		t.Fatal(err)
	}
	return c
}

// TestCartPoleDynamics checks steps against values computed by hand. From
// the zero state, force F = ±10 gives temp = F/1.1, thetaacc =
// -temp/(0.5*(4/3 - 0.1/1.1)) = ∓600/41 and xacc = temp + 0.05*600/41/1.1
// = ±400/41, so after one Euler step x_dot = ±8/41 and theta_dot = ∓12/41
// (x and theta still 0); the second step has theta = 0 again, hence the
// same accelerations. Row 2 starts from (0.01, -0.02, 0.03, 0.04), with
// the expected values worked out in float64 from gym's formulas.
func TestCartPoleDynamics(t *testing.T) {
	c := newCartPole(t, 3, 1)
	c.state[0], c.state[1] = cartPoleState{}, cartPoleState{}
	c.state[2] = cartPoleState{0.01, -0.02, 0.03, 0.04}
	want := [][3][]float64{
		{ // after step 1: actions 1, 0, 1
			{0, 8.0 / 41, 0, -12.0 / 41},
			{0, -8.0 / 41, 0, 12.0 / 41},
			{0.009600000000000001, 0.17467919574755525, 0.030799999999999998, -0.2430687179600081},
		},
		{ // after step 2: actions 1, 0, 0
			{0.02 * 8 / 41, 16.0 / 41, -0.02 * 12 / 41, -24.0 / 41},
			{-0.02 * 8 / 41, -16.0 / 41, 0.02 * 12 / 41, 24.0 / 41},
			{0.013093583914951107, -0.020868848948191993, 0.025938625640799837, 0.0591679999394166},
		},
		{ // after step 3: actions 1, 0, 0 (rows 0, 1 only checked in float32)
			nil, nil,
			{0.012676206935987267, -0.21635292104612766, 0.02712198563958817, 0.3599205713784138},
		},
	}
	acts := [][]int64{{1, 0, 1}, {1, 0, 0}, {1, 0, 0}}
	for k, a := range acts {
		ts, err := c.Step(actions(a...))
		if err != nil {
			t.Fatal(err)
		}
		for r := range 3 {
			if ts.StepType[r] != tensorbuf.Mid || ts.Reward[r] != 1 || ts.Discount[r] != 1 {
				t.Errorf("step %d row %d: %v reward %v discount %v", k+1, r, ts.StepType[r], ts.Reward[r], ts.Discount[r])
			}
			w := want[k][r]
			if w == nil {
				continue
			}
			for i := range 4 {
				if math.Abs(c.state[r][i]-w[i]) > 1e-15 {
					t.Errorf("step %d row %d: state %v, want %v", k+1, r, c.state[r], w)
					break
				}
			}
			if got := obsRow(ts, r); !slices.Equal(got, f32s(w...)) {
				t.Errorf("step %d row %d: observation %v, want %v", k+1, r, got, f32s(w...))
			}
		}
	}
}

func TestCartPoleTermination(t *testing.T) {
	c := newCartPole(t, 4, 1)
	th := CartPoleThetaThreshold
	c.state[0] = cartPoleState{0, 0, th - 0.001, 1}   // theta -> th + 0.019: terminates
	c.state[1] = cartPoleState{2.39, 1, 0, 0}         // x -> 2.41: terminates
	c.state[2] = cartPoleState{-2.39, -0.2, 0, 0}     // x -> -2.394, then -2.3941: stays
	c.state[3] = cartPoleState{0, 0, -th + 0.001, -1} // theta -> -th - 0.019: terminates
	ts, err := c.Step(actions(1, 1, 1, 0))
	if err != nil {
		t.Fatal(err)
	}
	wantTypes := []tensorbuf.StepType{tensorbuf.Last, tensorbuf.Last, tensorbuf.Mid, tensorbuf.Last}
	wantDisc := []float32{0, 0, 1, 0}
	if !slices.Equal(ts.StepType, wantTypes) || !slices.Equal(ts.Discount, wantDisc) || !slices.Equal(ts.Reward, []float32{1, 1, 1, 1}) {
		t.Fatalf("types %v discounts %v rewards %v", ts.StepType, ts.Discount, ts.Reward)
	}
	// The boundary step ignores the action (even an invalid one) and
	// starts a new episode from uniform(-0.05, 0.05).
	ts, err = c.Step(actions(7, -1, 1, 7))
	if err != nil {
		t.Fatal(err)
	}
	wantTypes = []tensorbuf.StepType{tensorbuf.First, tensorbuf.First, tensorbuf.Mid, tensorbuf.First}
	if !slices.Equal(ts.StepType, wantTypes) || !slices.Equal(ts.Reward, []float32{0, 0, 1, 0}) || !slices.Equal(ts.Discount, []float32{1, 1, 1, 1}) {
		t.Fatalf("after boundary: types %v rewards %v discounts %v", ts.StepType, ts.Reward, ts.Discount)
	}
	for _, r := range []int{0, 1, 3} {
		for _, v := range obsRow(ts, r) {
			if v < -0.05 || v >= 0.05 {
				t.Errorf("row %d: reset observation %v outside [-0.05, 0.05)", r, obsRow(ts, r))
			}
		}
		if c.steps[r] != 0 {
			t.Errorf("row %d: step counter %d after reset", r, c.steps[r])
		}
	}
	// An invalid action on a running row is refused before anything moves.
	before := c.state[2]
	_, err = c.Step(actions(0, 0, 2, 0))
	var re *driver.RowError
	if !errors.Is(err, driver.ErrSpec) || !errors.As(err, &re) || re.Row != 2 || c.state[2] != before || c.Current() != ts {
		t.Errorf("invalid action: %v", err)
	}
	if _, err := c.Step(map[string]*tensor.Dense{}); !errors.Is(err, driver.ErrSpec) {
		t.Errorf("missing action: %v", err)
	}
}

// TestCartPoleTimeLimit keeps row 0's pole balanced by hand (its state is
// zeroed after every step) so only the time limit ends its episode: steps
// 1..499 are Mid, step 500 is Last with discount 1 (truncation), then the
// boundary. Row 1 is set to terminate exactly at step 500: termination
// wins (discount 0).
func TestCartPoleTimeLimit(t *testing.T) {
	c := newCartPole(t, 2, 3)
	for k := 1; k <= 500; k++ {
		c.state[0] = cartPoleState{}
		c.state[1] = cartPoleState{}
		if k == 500 {
			c.state[1] = cartPoleState{2.39, 1, 0, 0}
		}
		ts, err := c.Step(actions(int64(k%2), int64(k%2)))
		if err != nil {
			t.Fatal(err)
		}
		wantType, disc0, disc1 := tensorbuf.Mid, float32(1), float32(1)
		if k == 500 {
			wantType, disc1 = tensorbuf.Last, 0
		}
		if ts.StepType[0] != wantType || ts.StepType[1] != wantType || ts.Discount[0] != disc0 || ts.Discount[1] != disc1 || ts.Reward[0] != 1 {
			t.Fatalf("step %d: types %v discounts %v rewards %v", k, ts.StepType, ts.Discount, ts.Reward)
		}
	}
	ts, err := c.Step(actions(0, 0))
	if err != nil {
		t.Fatal(err)
	}
	if ts.StepType[0] != tensorbuf.First || ts.StepType[1] != tensorbuf.First {
		t.Errorf("after the time limit: %v", ts.StepType)
	}

	// Without a time limit the episode goes on.
	c2 := newCartPole(t, 1, 3)
	if err := c2.SetTimeLimit(0); err != nil {
		t.Fatal(err)
	}
	for k := 1; k <= 600; k++ {
		c2.state[0] = cartPoleState{}
		ts, err := c2.Step(actions(0))
		if err != nil || ts.StepType[0] != tensorbuf.Mid {
			t.Fatalf("no limit, step %d: %v %v", k, ts.StepType, err)
		}
	}
	if err := c2.SetTimeLimit(-1); !errors.Is(err, driver.ErrConfig) {
		t.Errorf("negative limit: %v", err)
	}
}

// TestCartPoleSeeding: resets are reproducible, row r depends only on the
// seed and r, and the single CartPoleEnv matches row 0.
func TestCartPoleSeeding(t *testing.T) {
	first := func(n int, seed uint64) [][]float32 {
		c := newCartPole(t, n, seed)
		var rows [][]float32
		for r := range n {
			rows = append(rows, obsRow(c.Current(), r))
		}
		return rows
	}
	a, b, small, other := first(4, 11), first(4, 11), first(3, 11), first(4, 12)
	for r := range 4 {
		if !slices.Equal(a[r], b[r]) {
			t.Errorf("row %d: same seed, different resets %v %v", r, a[r], b[r])
		}
		if r < 3 && !slices.Equal(a[r], small[r]) {
			t.Errorf("row %d depends on the batch size: %v %v", r, a[r], small[r])
		}
		if slices.Equal(a[r], other[r]) {
			t.Errorf("row %d: seeds 11 and 12 gave the same reset", r)
		}
		for _, v := range a[r] {
			if v < -0.05 || v >= 0.05 || v == 0 {
				t.Errorf("row %d: reset %v", r, a[r])
			}
		}
	}
	if slices.Equal(a[0], a[1]) {
		t.Error("rows 0 and 1 reset to the same state")
	}
	e := NewCartPoleEnv(11)
	obs := map[string]*tensor.Dense{CartPoleObservationName: tensor.New(tensor.Of(tensor.Float32), tensor.WithShape(4))}
	if err := e.Reset(obs); err != nil {
		t.Fatal(err)
	}
	if got := obs[CartPoleObservationName].Float32s(); !slices.Equal(got, a[0]) {
		t.Errorf("CartPoleEnv reset %v, row 0 of CartPole %v", got, a[0])
	}
	if _, err := NewCartPole(0, 1); !errors.Is(err, driver.ErrConfig) {
		t.Errorf("zero envs: %v", err)
	}
	c, _ := NewCartPole(1, 1)
	if _, err := c.Step(actions(0)); !errors.Is(err, driver.ErrNotReset) || c.Current() != nil {
		t.Errorf("step before reset: %v", err)
	}
}
