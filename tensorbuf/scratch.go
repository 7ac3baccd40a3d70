package tensorbuf

import "github.com/trajring/trajring/internal/scratch"

// grow is scratch.Grow: it returns (*s)[:n], reallocating *s when it is
// too short. The samplers, transitions and hindsight keep their scratch
// slices on their own structs and size them with it.
func grow[T any](s *[]T, n int) []T { return scratch.Grow(s, n) }
