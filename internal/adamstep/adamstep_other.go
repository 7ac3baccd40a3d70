//go:build !amd64 || purego

package adamstep

// useAVX and hasAVX are false: there is no vector loop.
var useAVX, hasAVX = false, false

// vector does nothing: scalar does every element.
func vector(w, g, m, v []float32, c *Coeffs) int { return 0 }
