//go:build !amd64 || purego

package adamstep

// useAVX, hasAVX, useAVX512 and hasAVX512 are false: there is no vector
// loop.
var useAVX, hasAVX, useAVX512, hasAVX512 = false, false, false, false

// vector does nothing: scalar does every element.
func vector(w, g, m, v []float32, c *Coeffs) int { return 0 }
