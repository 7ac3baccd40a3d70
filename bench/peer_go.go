package bench

import (
	"math/rand"
	rand2 "math/rand/v2"
)

// The Go peer is a replay buffer as Go RL code commonly writes it: a
// slice of step structs, sampled with rand.Perm over the whole buffer on
// every call, returning a freshly allocated slice of structs. It does no
// validation beyond Go's bounds checks: no step types, finiteness,
// shapes or row ownership, no step metadata and no locking, as such code
// seldom has; the report says so next to its columns.

// pixelStep is one stored step of the Pixels layout as a struct.
type pixelStep struct {
	Obs                    [32 * 32 * 3]uint8
	Action                 [1]float32
	StepType, NextStepType int32
	Reward, Discount       float32
}

// lowDimStep is one stored step of the LowDim layout as a struct.
type lowDimStep struct {
	Obs                    [17]float32
	Action                 [6]float32
	StepType, NextStepType int32
	Reward, Discount       float32
}

// structBuffer is the slice-of-structs peer: numEnvs rows of capacity
// steps, row-major, as ours.
type structBuffer[T any] struct {
	steps    []T
	numEnvs  int
	capacity int
	rng      *rand2.Rand
	sink     []T
}

func newStructBuffer[T any](numEnvs, capacity int, fill func(*T, int)) *structBuffer[T] {
	s := &structBuffer[T]{steps: make([]T, numEnvs*capacity), numEnvs: numEnvs, capacity: capacity, rng: rand2.New(rand2.NewPCG(5, 6))}
	for i := range s.steps {
		fill(&s.steps[i], i)
	}
	return s
}

// start maps a flat index to a window start that fits l steps in its row.
func (s *structBuffer[T]) start(i, l int) int {
	r, t := i/s.capacity, i%s.capacity
	return r*s.capacity + min(t, s.capacity-l)
}

// samplePerm is the common Go idiom: a permutation of every stored step
// per call, the first n taken.
func (s *structBuffer[T]) samplePerm(n, l int) {
	perm := rand.Perm(len(s.steps))
	out := make([]T, 0, n*l)
	for _, i := range perm[:n] {
		j := s.start(i, l)
		out = append(out, s.steps[j:j+l]...)
	}
	s.sink = out
}

// sampleIntN draws each index with rand.IntN instead (the cheaper idiom),
// still allocating the batch.
func (s *structBuffer[T]) sampleIntN(n, l int) {
	out := make([]T, 0, n*l)
	for range n {
		j := s.start(s.rng.IntN(len(s.steps)), l)
		out = append(out, s.steps[j:j+l]...)
	}
	s.sink = out
}

// sampleTransitions returns n (step, next step) pairs, drawn with Perm.
func (s *structBuffer[T]) sampleTransitionsPerm(n int) {
	perm := rand.Perm(len(s.steps))
	out := make([]T, 0, 2*n)
	for _, i := range perm[:n] {
		j := s.start(i, 2)
		out = append(out, s.steps[j], s.steps[j+1])
	}
	s.sink = out
}

func (s *structBuffer[T]) sampleTransitionsIntN(n int) {
	out := make([]T, 0, 2*n)
	for range n {
		j := s.start(s.rng.IntN(len(s.steps)), 2)
		out = append(out, s.steps[j], s.steps[j+1])
	}
	s.sink = out
}

// add writes a batch of steps, one per row, at each row's cursor.
func (s *structBuffer[T]) add(batch []T, cursor int) {
	t := cursor % s.capacity
	for r := range batch {
		s.steps[r*s.capacity+t] = batch[r]
	}
}

func fillPixel(p *pixelStep, i int) {
	for k := range p.Obs {
		p.Obs[k] = byte(i + k)
	}
	p.Action[0] = float32(i)
	p.StepType, p.NextStepType, p.Reward, p.Discount = 1, 1, 1, 1
}

func fillLowDim(p *lowDimStep, i int) {
	for k := range p.Obs {
		p.Obs[k] = float32(i + k)
	}
	for k := range p.Action {
		p.Action[k] = float32(i - k)
	}
	p.StepType, p.NextStepType, p.Reward, p.Discount = 1, 1, 1, 1
}

// goPeer is a Go peer's operations for one layout.
type goPeer interface {
	samplePerm(n, l int)
	sampleIntN(n, l int)
	sampleTransitionsPerm(n int)
	sampleTransitionsIntN(n int)
	addRows(w, cursor int)
	release()
}

type pixelPeer struct {
	*structBuffer[pixelStep]
	batch []pixelStep
}

func (p *pixelPeer) addRows(w, cursor int) {
	if len(p.batch) < w {
		p.batch = make([]pixelStep, w)
	}
	p.add(p.batch[:w], cursor)
}

func (p *pixelPeer) release() { p.steps, p.sink, p.batch = nil, nil, nil }

type lowDimPeer struct {
	*structBuffer[lowDimStep]
	batch []lowDimStep
}

func (p *lowDimPeer) addRows(w, cursor int) {
	if len(p.batch) < w {
		p.batch = make([]lowDimStep, w)
	}
	p.add(p.batch[:w], cursor)
}

func (p *lowDimPeer) release() { p.steps, p.sink, p.batch = nil, nil, nil }

// newGoPeer returns the slice-of-structs peer of a layout, or nil for a
// layout it has no struct for.
func newGoPeer(l Layout, numEnvs, capacity int) goPeer {
	switch l.Name {
	case "pixels":
		return &pixelPeer{structBuffer: newStructBuffer(numEnvs, capacity, fillPixel)}
	case "lowdim":
		return &lowDimPeer{structBuffer: newStructBuffer(numEnvs, capacity, fillLowDim)}
	}
	return nil
}
