//go:build trajring_cuda

package dqn

import (
	"fmt"

	"github.com/trajring/trajring/driver"
	"github.com/trajring/trajring/gpu"
	"github.com/trajring/trajring/internal/rawbytes"
	"github.com/trajring/trajring/kernels"
	"gorgonia.org/tensor"
)

// actScratch is the device memory of the greedy forward pass for up to
// rows observations: the uploaded observations, one activation per layer
// and the chosen actions.
type actScratch struct {
	rows int
	mem  kernels.Arena
	obs  *tensor.Dense
	h    []*tensor.Dense
	act  *tensor.Dense
}

// actScratchFor returns scratch for n rows, reallocated when too small.
func (l *DeviceLearner) actScratchFor(n int) (*actScratch, error) {
	if l.act != nil && l.act.rows >= n {
		return l.act, nil
	}
	rows := max(n, 1)
	if l.act != nil {
		rows = max(rows, 2*l.act.rows)
	}
	sizes := []int64{4 * int64(rows*l.cfg.ObsDim)}
	for _, d := range l.dims[1:] {
		sizes = append(sizes, 4*int64(rows*d))
	}
	sizes = append(sizes, 8*int64(rows))
	offs, total := make([]int64, len(sizes)), int64(0)
	for i, s := range sizes {
		offs[i] = total
		total += (s + 255) &^ 255
	}
	a, err := l.be.Alloc(total)
	if err != nil {
		return nil, fmt.Errorf("dqn: device learner: %w", err)
	}
	s := &actScratch{rows: rows, mem: a}
	s.obs = l.view(a, offs[0], tensor.Float32, &err, rows, l.cfg.ObsDim)
	for i, d := range l.dims[1:] {
		s.h = append(s.h, l.view(a, offs[1+i], tensor.Float32, &err, rows, d))
	}
	s.act = l.view(a, offs[len(offs)-1], tensor.Int64, &err, rows)
	if err != nil {
		_ = l.be.Free(a)
		return nil, err
	}
	if l.act != nil {
		l.forget(l.act.mem)
		if err := l.be.Free(l.act.mem); err != nil {
			return nil, fmt.Errorf("dqn: device learner: %w", err)
		}
	}
	l.mem = append(l.mem, a)
	l.act = s
	return s, nil
}

// forget drops a from the arenas Close frees.
func (l *DeviceLearner) forget(a kernels.Arena) {
	for i, m := range l.mem {
		if m == a {
			l.mem = append(l.mem[:i], l.mem[i+1:]...)
			return
		}
	}
}

// Act writes the online network's greedy actions (the first largest
// Q-value) for n observations to actions[:n]: obs is a float32 device
// tensor of the backend holding n*ObsDim values (a GPU-resident
// environment's step). The forward pass and the argmax run on the
// device, after the work queued before (training steps included), and
// only the n actions come back; Act waits for them.
func (l *DeviceLearner) Act(obs *tensor.Dense, n int, actions []int64) error {
	if n < 1 || len(actions) < n || obs == nil {
		return fmt.Errorf("%w: %d greedy actions into %d", ErrConfig, n, len(actions))
	}
	// Never a value verb on a device tensor: it would read its memory.
	if obs.Dtype() != tensor.Float32 || obs.Shape().TotalSize() < n*l.cfg.ObsDim {
		return fmt.Errorf("%w: %d greedy actions from observations of %v %v", ErrConfig, n, obs.Dtype(), obs.Shape())
	}
	if err := l.be.CheckSource(obs, 4*int64(n*l.cfg.ObsDim)); err != nil {
		return fmt.Errorf("%w: observations: %w", ErrConfig, err)
	}
	s, err := l.actScratchFor(n)
	if err != nil {
		return err
	}
	return l.act1(s, obs, n, actions)
}

// ActHost is Act on observations in host memory (n*ObsDim values of
// obs), which it copies to the device first.
func (l *DeviceLearner) ActHost(obs []float32, n int, actions []int64) error {
	if n < 1 || len(obs) < n*l.cfg.ObsDim || len(actions) < n {
		return fmt.Errorf("%w: %d greedy actions from %d observation values into %d", ErrConfig, n, len(obs), len(actions))
	}
	s, err := l.actScratchFor(n)
	if err != nil {
		return err
	}
	if err := l.be.Upload(s.mem, 0, rawbytes.Of(obs[:n*l.cfg.ObsDim])); err != nil {
		return fmt.Errorf("dqn: device learner: %w", err)
	}
	return l.act1(s, s.obs, n, actions)
}

// QValuesHost writes the online network's Q-values of n observations
// (host memory, row-major [n, ObsDim]) to q ([n, NumActions]), computed
// on the device: the observations go up, the Q-values come back, and it
// waits for them.
func (l *DeviceLearner) QValuesHost(obs []float32, n int, q []float32) error {
	if n < 1 || len(obs) < n*l.cfg.ObsDim || len(q) < n*l.cfg.NumActions {
		return fmt.Errorf("%w: %d observations in %d values, %d Q-values", ErrConfig, n, len(obs), len(q))
	}
	s, err := l.actScratchFor(n)
	if err != nil {
		return err
	}
	if err := l.be.Upload(s.mem, 0, rawbytes.Of(obs[:n*l.cfg.ObsDim])); err != nil {
		return fmt.Errorf("dqn: device learner: %w", err)
	}
	if err := l.forwardN(s, s.obs, n); err != nil {
		return err
	}
	return l.download(q[:n*l.cfg.NumActions], s.h[len(s.h)-1])
}

// QFunc returns a driver.QFunc over the observation field name (float32,
// ObsDim values per row, in host memory) for driver.NewEpsilonGreedyPolicy,
// computing the Q-values on the device (QValuesHost).
func (l *DeviceLearner) QFunc(name string) driver.QFunc {
	return func(obs map[string]*tensor.Dense, q []float32) error {
		d, ok := obs[name]
		if !ok || d.Dtype() != tensor.Float32 || !d.IsNativelyAccessible() || d.Shape().TotalSize()%l.cfg.ObsDim != 0 {
			return fmt.Errorf("%w: observation %q missing or not float32 of %d per row in host memory", ErrConfig, name, l.cfg.ObsDim)
		}
		xs := d.Float32s()
		return l.QValuesHost(xs, len(xs)/l.cfg.ObsDim, q)
	}
}

// forwardN runs the online network on n observations into s.h.
func (l *DeviceLearner) forwardN(s *actScratch, obs *tensor.Dense, n int) error {
	in := obs
	for i := range l.pw {
		k, m := l.dims[i], l.dims[i+1]
		if err := l.be.GemmEp(false, false, false, n, m, k, in, l.pw[i], s.h[i],
			gpu.GemmEpilogue{Bias: l.pb[i], ReLU: i+1 < len(l.pw)}); err != nil {
			return fmt.Errorf("dqn: forward pass: %w", err)
		}
		in = s.h[i]
	}
	return nil
}

func (l *DeviceLearner) act1(s *actScratch, obs *tensor.Dense, n int, actions []int64) error {
	if err := l.forwardN(s, obs, n); err != nil {
		return err
	}
	if err := l.be.Argmax(s.h[len(s.h)-1], s.act, n, l.cfg.NumActions); err != nil {
		return fmt.Errorf("dqn: greedy actions: %w", err)
	}
	a, off, err := l.locate(s.act)
	if err != nil {
		return err
	}
	if err := l.be.Download(rawbytes.Of(actions[:n]), a, off); err != nil {
		return fmt.Errorf("dqn: greedy actions: %w", err)
	}
	return nil
}
