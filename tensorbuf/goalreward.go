package tensorbuf

import (
	"fmt"
	"math"
)

// DistanceThreshold returns the sparse reward and is-done functions of
// goal-reaching tasks (the robotics tasks of the HER paper and
// Gymnasium-Robotics): a goal counts as reached when the Euclidean
// distance between the achieved and the desired goal is at most eps;
// reward is 0 when reached and -1 otherwise, and reaching it terminates
// the episode. eps must be finite and >= 0 (ErrInvalidArg otherwise); with
// eps 0 goals must match exactly, as in the bit-flipping task.
//
// The reference loop, per transition, over the goal's d elements:
//
//	s := 0.0
//	for i := range d {
//		x := achieved[i] - desired[i]
//		s += x * x
//	}
//	reached := math.Sqrt(s) <= eps
//
// The returned functions are safe for concurrent use.
func DistanceThreshold(eps float64) (reward func(achieved, desired []float64) float32, isDone func(achieved, desired []float64) bool, err error) {
	if math.IsNaN(eps) || math.IsInf(eps, 0) || eps < 0 {
		return nil, nil, fmt.Errorf("%w: distance threshold %v", ErrInvalidArg, eps)
	}
	reached := func(a, d []float64) bool {
		if len(a) != len(d) {
			return false
		}
		s := 0.0
		for i := range a {
			x := a[i] - d[i]
			s += x * x
		}
		return math.Sqrt(s) <= eps
	}
	reward = func(a, d []float64) float32 {
		if reached(a, d) {
			return 0
		}
		return -1
	}
	return reward, reached, nil
}
