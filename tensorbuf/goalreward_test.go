package tensorbuf_test

import (
	"errors"
	"math"
	"testing"

	"github.com/trajring/trajring/tensorbuf"
)

func TestDistanceThreshold(t *testing.T) {
	for _, tc := range []struct {
		eps       float64
		ach, des  []float64
		reward    float32
		reachable bool
	}{
		{0.05, []float64{0, 0, 0}, []float64{0.03, 0.04, 0}, 0, true}, // distance 0.05
		{0.05, []float64{0, 0, 0}, []float64{0.03, 0.041, 0}, -1, false},
		{0, []float64{1, 0, 1}, []float64{1, 0, 1}, 0, true},
		{0, []float64{1, 0, 1}, []float64{1, 1, 1}, -1, false},
		{3, []float64{-1}, []float64{2}, 0, true},
		{1, []float64{0}, []float64{0, 0}, -1, false}, // sizes differ
	} {
		reward, done, err := tensorbuf.DistanceThreshold(tc.eps)
		if err != nil {
			t.Fatal(err)
		}
		if r, d := reward(tc.ach, tc.des), done(tc.ach, tc.des); r != tc.reward || d != tc.reachable {
			t.Fatalf("eps %v, %v vs %v: reward %v done %v, want %v %v", tc.eps, tc.ach, tc.des, r, d, tc.reward, tc.reachable)
		}
	}
	for _, eps := range []float64{-0.1, math.NaN(), math.Inf(1)} {
		if _, _, err := tensorbuf.DistanceThreshold(eps); !errors.Is(err, tensorbuf.ErrInvalidArg) {
			t.Fatalf("eps %v: %v", eps, err)
		}
	}
}
