// Package pointmass is the example of a user's own Go environment for
// Python (docs/python.md): a point mass on a line pushed by a force, one
// driver.Env per row, which main.go registers with capi.
package pointmass

import (
	"fmt"
	"math/rand/v2"

	"github.com/trajring/trajring/driver"
	"github.com/trajring/trajring/tensorbuf"
	"gorgonia.org/tensor"
)

// MaxSteps is the time limit of an episode (a truncation).
const MaxSteps = 200

// Env is one point mass: observation [position, velocity] (float32),
// action [force] (float32, meant to lie in [-1, 1]; the env does not
// clip it), reward -position², terminated once both position and
// velocity are within 0.05 of 0. Not safe for concurrent use.
type Env struct {
	rng      *rand.Rand
	pos, vel float64
	steps    int
}

// New returns row row's env, with its own random stream of seed.
func New(row int, seed uint64) (driver.Env, error) {
	return &Env{rng: rand.New(rand.NewPCG(seed, 0x706d617373^uint64(row)))}, nil
}

// ObservationSpec returns "state": [position, velocity].
func (e *Env) ObservationSpec() []tensorbuf.Field {
	return []tensorbuf.Field{{Name: "state", Role: tensorbuf.Observation, DType: tensorbuf.Float32, Shape: []int{2},
		Min: []float64{-10, -10}, Max: []float64{10, 10}}}
}

// ActionSpec returns "force": one float32 in [-1, 1].
func (e *Env) ActionSpec() []tensorbuf.Field {
	return []tensorbuf.Field{{Name: "force", Role: tensorbuf.Action, DType: tensorbuf.Float32, Shape: []int{1},
		Min: []float64{-1}, Max: []float64{1}}}
}

func (e *Env) write(obs map[string]*tensor.Dense) {
	o := obs["state"].Float32s()
	o[0], o[1] = float32(e.pos), float32(e.vel)
}

// Reset starts an episode at a uniform position in [-1, 1], at rest.
func (e *Env) Reset(obs map[string]*tensor.Dense) error {
	e.pos, e.vel, e.steps = 2*e.rng.Float64()-1, 0, 0
	e.write(obs)
	return nil
}

// Step applies the force for 0.1 s.
func (e *Env) Step(action, obs map[string]*tensor.Dense) (float32, driver.Status, error) {
	f := action["force"].Float32s()
	if len(f) != 1 {
		return 0, driver.Running, fmt.Errorf("pointmass: force of %d values", len(f))
	}
	e.vel += 0.1 * float64(f[0])
	e.pos += 0.1 * e.vel
	e.steps++
	e.write(obs)
	reward := float32(-e.pos * e.pos)
	switch {
	case e.pos*e.pos < 0.0025 && e.vel*e.vel < 0.0025:
		return reward, driver.Terminated, nil
	case e.steps >= MaxSteps:
		return reward, driver.Truncated, nil
	}
	return reward, driver.Running, nil
}
