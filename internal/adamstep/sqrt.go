package adamstep

import "math"

// sqrt32 is the correctly rounded float32 square root: the float64 root
// of a float32 rounded to float32 is (float64 has more than 2*24+2 bits).
func sqrt32(x float32) float32 { return float32(math.Sqrt(float64(x))) }
