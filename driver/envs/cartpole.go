package envs

import (
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/trajring/trajring/driver"
	"github.com/trajring/trajring/tensorbuf"
	"gorgonia.org/tensor"
)

// CartPole constants: the classic dynamics and thresholds of gym's
// CartPole-v1 (Barto, Sutton and Anderson's cart-pole, Euler integration).
const (
	CartPoleGravity        = 9.8
	CartPoleMassCart       = 1.0
	CartPoleMassPole       = 0.1
	CartPoleLength         = 0.5 // half the pole's length
	CartPoleForceMag       = 10.0
	CartPoleTau            = 0.02 // seconds between state updates
	CartPoleXThreshold     = 2.4
	CartPoleThetaThreshold = 12 * 2 * math.Pi / 360 // 12 degrees in radians
	// CartPoleMaxSteps is CartPole-v1's time limit: the 500th step of an
	// episode is Last with discount 1 (truncation) unless it terminates.
	CartPoleMaxSteps = 500

	cartPoleTotalMass      = CartPoleMassPole + CartPoleMassCart
	cartPolePoleMassLength = CartPoleMassPole * CartPoleLength
)

// Field names of CartPole.
const (
	CartPoleObservationName = "observation" // float32 [4]: x, x_dot, theta, theta_dot
	CartPoleActionName      = "action"      // int64: 0 pushes left, 1 pushes right
)

// cartPoleState is x, x_dot, theta, theta_dot.
type cartPoleState [4]float64

// step advances s by one Euler step under action a (0 or 1) and reports
// whether the new state is terminal.
func (s *cartPoleState) step(a int64) (terminated bool) {
	cos, sin := sinCos(s[2])
	return s.advance(a, cos, sin)
}

// advance is step with cos(theta) and sin(theta) already computed, so a
// batch can take every row's trigonometry in one loop and the dependent
// divisions of the dynamics in another, where the processor overlaps
// them across rows (Go does not reorder the two for us).
func (s *cartPoleState) advance(a int64, cos, sin float64) (terminated bool) {
	x, xDot, theta, thetaDot := s[0], s[1], s[2], s[3]
	force := -CartPoleForceMag
	if a == 1 {
		force = CartPoleForceMag
	}
	temp := (force + cartPolePoleMassLength*thetaDot*thetaDot*sin) / cartPoleTotalMass
	thetaAcc := (CartPoleGravity*sin - cos*temp) /
		(CartPoleLength * (4.0/3.0 - CartPoleMassPole*cos*cos/cartPoleTotalMass))
	xAcc := temp - cartPolePoleMassLength*thetaAcc*cos/cartPoleTotalMass
	x += CartPoleTau * xDot
	xDot += CartPoleTau * xAcc
	theta += CartPoleTau * thetaDot
	thetaDot += CartPoleTau * thetaAcc
	*s = cartPoleState{x, xDot, theta, thetaDot}
	return x < -CartPoleXThreshold || x > CartPoleXThreshold ||
		theta < -CartPoleThetaThreshold || theta > CartPoleThetaThreshold
}

// reset draws every state variable uniformly from [-0.05, 0.05).
func (s *cartPoleState) reset(rng *rand.Rand) {
	for i := range s {
		s[i] = -0.05 + 0.1*rng.Float64()
	}
}

func (s *cartPoleState) write(obs []float32) {
	for i, v := range s {
		obs[i] = float32(v)
	}
}

func cartPoleSpecs() (obs, act []tensorbuf.Field) {
	obs = []tensorbuf.Field{{
		Name: CartPoleObservationName, Role: tensorbuf.Observation, DType: tensorbuf.Float32, Shape: []int{4},
		Min: []float64{-2 * CartPoleXThreshold, -math.MaxFloat32, -2 * CartPoleThetaThreshold, -math.MaxFloat32},
		Max: []float64{2 * CartPoleXThreshold, math.MaxFloat32, 2 * CartPoleThetaThreshold, math.MaxFloat32},
	}}
	act = []tensorbuf.Field{{
		Name: CartPoleActionName, Role: tensorbuf.Action, DType: tensorbuf.Int64, Min: []float64{0}, Max: []float64{1},
	}}
	return obs, act
}

func checkCartPoleAction(a int64) error {
	if a != 0 && a != 1 {
		return fmt.Errorf("%w: cartpole action %d is not 0 or 1", driver.ErrSpec, a)
	}
	return nil
}

// rowRNG returns row r's random stream: a row's episodes depend only on
// the seed and the row index, not on the batch size.
func rowRNG(seed uint64, r int) *rand.Rand {
	return rand.New(rand.NewPCG(seed, 0x63617274706f6c65^uint64(r)))
}

// CartPole is a vectorised CartPole-v1: numEnvs independent cart-poles
// stepped together in one loop. Reward is 1 on every step after First
// (including the terminating one); a step that ends with |x| > 2.4 or
// |theta| > 12 degrees terminates (Last, discount 0); the time limit
// (CartPoleMaxSteps by default) truncates (Last, discount 1). Resets draw
// the state from uniform(-0.05, 0.05) with row r's own PCG stream from the
// seed. Physics run in float64; observations are float32.
//
// CartPole double-buffers its time steps (see driver.Environment) and does
// not allocate in Step. It is not safe for concurrent use.
type CartPole struct {
	state    []cartPoleState
	steps    []int
	sc       [][2]float64 // cos and sin of each row's theta during Step
	rngs     []*rand.Rand
	maxSteps int
	b        buffers
	obs, act []tensorbuf.Field
}

// NewCartPole returns numEnvs cart-poles seeded with seed (ErrConfig if
// numEnvs < 1).
func NewCartPole(numEnvs int, seed uint64) (*CartPole, error) {
	if numEnvs < 1 {
		return nil, fmt.Errorf("%w: number of environments %d < 1", driver.ErrConfig, numEnvs)
	}
	c := &CartPole{
		state:    make([]cartPoleState, numEnvs),
		steps:    make([]int, numEnvs),
		sc:       make([][2]float64, numEnvs),
		rngs:     make([]*rand.Rand, numEnvs),
		maxSteps: CartPoleMaxSteps,
	}
	for r := range c.rngs {
		c.rngs[r] = rowRNG(seed, r)
	}
	c.obs, c.act = cartPoleSpecs()
	var err error
	if c.b, err = newBuffers(c.obs, numEnvs); err != nil {
		return nil, err
	}
	return c, nil
}

// SetTimeLimit sets the number of steps after which an episode is
// truncated; 0 removes the limit. It returns ErrConfig for n < 0.
func (c *CartPole) SetTimeLimit(n int) error {
	if n < 0 {
		return fmt.Errorf("%w: time limit %d < 0", driver.ErrConfig, n)
	}
	c.maxSteps = n
	return nil
}

// BatchSize returns the number of cart-poles.
func (c *CartPole) BatchSize() int { return len(c.state) }

// ObservationSpec returns "observation", float32 [4] with gym's bounds.
func (c *CartPole) ObservationSpec() []tensorbuf.Field { return c.obs }

// ActionSpec returns "action", a scalar int64 in [0, 1].
func (c *CartPole) ActionSpec() []tensorbuf.Field { return c.act }

// Current returns the latest time step, or nil before Reset.
func (c *CartPole) Current() *driver.TimeStep { return c.b.current() }

// Reset starts a new episode on every row.
func (c *CartPole) Reset() (*driver.TimeStep, error) {
	ts := c.b.next()
	obs := ts.Observation[CartPoleObservationName].Float32s()
	for r := range c.state {
		c.resetRow(ts, obs, r)
	}
	return c.b.advance(), nil
}

func (c *CartPole) resetRow(ts *driver.TimeStep, obs []float32, r int) {
	c.state[r].reset(c.rngs[r])
	c.steps[r] = 0
	c.state[r].write(obs[4*r : 4*r+4])
	ts.StepType[r], ts.Reward[r], ts.Discount[r] = tensorbuf.First, 0, 1
}

// Step pushes every cart left (action 0) or right (1); rows after a Last
// step start a new episode instead. A malformed action tensor, or a value
// other than 0 or 1 on a row that is not at a Last step, is refused
// (ErrSpec, with a driver.RowError for a bad value) before any row changes.
func (c *CartPole) Step(action map[string]*tensor.Dense) (*driver.TimeStep, error) {
	prev := c.b.current()
	if prev == nil {
		return nil, driver.ErrNotReset
	}
	if err := driver.CheckTensors(c.act, len(c.state), action); err != nil {
		return nil, fmt.Errorf("envs: cartpole step: %w", err)
	}
	a := action[CartPoleActionName].Int64s()
	for r, v := range a {
		if prev.StepType[r] != tensorbuf.Last {
			if err := checkCartPoleAction(v); err != nil {
				return nil, fmt.Errorf("envs: cartpole step: %w", &driver.RowError{Row: r, Err: err})
			}
		}
	}
	ts := c.b.next()
	obs := ts.Observation[CartPoleObservationName].Float32s()
	// Two passes over the rows (bit for bit what step does row by row):
	// the trigonometry first, then the dynamics, whose chain of
	// divisions overlaps across rows only in a loop this small.
	sc := c.sc
	for r := range c.state {
		sc[r][0], sc[r][1] = sinCos(c.state[r][2])
	}
	for r := range c.state {
		if prev.StepType[r] == tensorbuf.Last {
			c.resetRow(ts, obs, r)
			continue
		}
		terminated := c.state[r].advance(a[r], sc[r][0], sc[r][1])
		c.steps[r]++
		c.state[r].write(obs[4*r : 4*r+4])
		ts.Reward[r] = 1
		switch {
		case terminated:
			ts.StepType[r], ts.Discount[r] = tensorbuf.Last, 0
		case c.maxSteps > 0 && c.steps[r] >= c.maxSteps:
			ts.StepType[r], ts.Discount[r] = tensorbuf.Last, 1
		default:
			ts.StepType[r], ts.Discount[r] = tensorbuf.Mid, 1
		}
	}
	return c.b.advance(), nil
}

// CartPoleEnv is a single (unbatched) CartPole-v1 implementing driver.Env,
// for use with driver.NewParallel. It has the same dynamics, specs, time
// limit and seeding as one row of CartPole (row 0 of a CartPole with the
// same seed). It is not safe for concurrent use.
type CartPoleEnv struct {
	state    cartPoleState
	steps    int
	rng      *rand.Rand
	obs, act []tensorbuf.Field
}

// NewCartPoleEnv returns a single cart-pole seeded with seed.
func NewCartPoleEnv(seed uint64) *CartPoleEnv {
	e := &CartPoleEnv{rng: rowRNG(seed, 0)}
	e.obs, e.act = cartPoleSpecs()
	return e
}

// ObservationSpec returns "observation", float32 [4] with gym's bounds.
func (e *CartPoleEnv) ObservationSpec() []tensorbuf.Field { return e.obs }

// ActionSpec returns "action", a scalar int64 in [0, 1].
func (e *CartPoleEnv) ActionSpec() []tensorbuf.Field { return e.act }

// Reset starts a new episode and writes its first observation.
func (e *CartPoleEnv) Reset(obs map[string]*tensor.Dense) error {
	e.state.reset(e.rng)
	e.steps = 0
	e.state.write(obs[CartPoleObservationName].Float32s())
	return nil
}

// Step applies action and writes the next observation.
func (e *CartPoleEnv) Step(action, obs map[string]*tensor.Dense) (float32, driver.Status, error) {
	a := action[CartPoleActionName].Int64s()[0]
	if err := checkCartPoleAction(a); err != nil {
		return 0, driver.Running, err
	}
	terminated := e.state.step(a)
	e.steps++
	e.state.write(obs[CartPoleObservationName].Float32s())
	switch {
	case terminated:
		return 1, driver.Terminated, nil
	case e.steps >= CartPoleMaxSteps:
		return 1, driver.Truncated, nil
	}
	return 1, driver.Running, nil
}
