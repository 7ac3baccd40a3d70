// Package scratch reuses caller-owned slices as scratch space, so that a
// hot path that needs n elements allocates only when n outgrows what it
// had.
package scratch

// Grow sets *s to (*s)[:n], first replacing it with a new slice of n
// elements when its capacity is less than n, and returns it. Elements
// kept from before are not cleared: the caller overwrites them. It is
// safe for concurrent use on distinct slices.
func Grow[T any](s *[]T, n int) []T {
	if cap(*s) < n {
		*s = make([]T, n)
	}
	*s = (*s)[:n]
	return *s
}

// Zeroed is Grow with every one of the n elements set to the zero value.
// It is safe for concurrent use on distinct slices.
func Zeroed[T any](s *[]T, n int) []T {
	out := Grow(s, n)
	clear(out)
	return out
}
