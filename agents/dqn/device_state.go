//go:build trajring_cuda

package dqn

import (
	"encoding/gob"
	"fmt"
	"io"
	"math"
	"slices"

	"github.com/trajring/trajring/internal/rawbytes"
	"gorgonia.org/tensor"
)

// SaveState writes the learner's whole training state in Agent.SaveState's
// format (online and target networks, Adam's moments and step count, the
// gradient-step count and the current learning rate), so that either
// learner can continue the other's run. It copies the state to the host,
// waiting for the device.
func (l *DeviceLearner) SaveState(w io.Writer) error {
	var flat [4][]float32
	for i, t := range []*tensor.Dense{l.params, l.targ, l.m, l.v} {
		flat[i] = make([]float32, l.nparam)
		if err := l.download(flat[i], t); err != nil {
			return err
		}
	}
	s := agentState{
		Format: stateFormat, Dims: l.dims, AdamT: l.adamT, GradientSteps: l.steps,
		LearningRate: l.cfg.LearningRate, Beta1: 0.9, Beta2: 0.999, CurrentLR: l.lr, HasCurrentLR: true,
	}
	off := 0
	for i := range len(l.dims) - 1 {
		k, n := l.dims[i], l.dims[i+1]
		s.Online, s.Target = append(s.Online, flat[0][off:off+k*n]), append(s.Target, flat[1][off:off+k*n])
		s.AdamM, s.AdamV = append(s.AdamM, flat[2][off:off+k*n]), append(s.AdamV, flat[3][off:off+k*n])
		off += k * n
		s.OnlineB, s.TargetB = append(s.OnlineB, flat[0][off:off+n]), append(s.TargetB, flat[1][off:off+n])
		s.AdamM, s.AdamV = append(s.AdamM, flat[2][off:off+n]), append(s.AdamV, flat[3][off:off+n])
		off += n
	}
	if err := gob.NewEncoder(w).Encode(s); err != nil {
		return fmt.Errorf("dqn: saving the device learner's state: %w", err)
	}
	return nil
}

// LoadState reads a state written by SaveState (of either learner) into
// the learner, uploading it on the backend's stream. A state of other
// layer sizes, learning rate or format, or one that does not decode,
// returns an error wrapping ErrConfig and changes nothing.
func (l *DeviceLearner) LoadState(r io.Reader) error {
	var s agentState
	if err := gob.NewDecoder(r).Decode(&s); err != nil {
		return fmt.Errorf("%w: decoding an agent state: %w", ErrConfig, err)
	}
	if s.Format != stateFormat || !slices.Equal(s.Dims, l.dims) || s.LearningRate != l.cfg.LearningRate ||
		s.Beta1 != 0.9 || s.Beta2 != 0.999 || s.AdamT < 0 || s.GradientSteps < 0 {
		return fmt.Errorf("%w: agent state of format %q, layer sizes %v, learning rate %g, betas %g and %g, steps %d and %d "+
			"does not fit this learner (layer sizes %v, learning rate %g)", ErrConfig, s.Format, s.Dims, s.LearningRate,
			s.Beta1, s.Beta2, s.AdamT, s.GradientSteps, l.dims, l.cfg.LearningRate)
	}
	lr := s.LearningRate
	if s.HasCurrentLR {
		if !(s.CurrentLR >= 0) || math.IsInf(s.CurrentLR, 1) {
			return fmt.Errorf("%w: agent state with learning rate %g", ErrConfig, s.CurrentLR)
		}
		lr = s.CurrentLR
	}
	L := len(l.dims) - 1
	if len(s.Online) != L || len(s.OnlineB) != L || len(s.Target) != L || len(s.TargetB) != L || len(s.AdamM) != 2*L || len(s.AdamV) != 2*L {
		return fmt.Errorf("%w: agent state has the wrong number of layers", ErrConfig)
	}
	var flat [4][]float32
	for l2 := range L {
		k, n := l.dims[l2], l.dims[l2+1]
		parts := [4][2][]float32{{s.Online[l2], s.OnlineB[l2]}, {s.Target[l2], s.TargetB[l2]},
			{s.AdamM[2*l2], s.AdamM[2*l2+1]}, {s.AdamV[2*l2], s.AdamV[2*l2+1]}}
		for i, p := range parts {
			if len(p[0]) != k*n || len(p[1]) != n {
				return fmt.Errorf("%w: agent state has layers of the wrong sizes", ErrConfig)
			}
			flat[i] = append(append(flat[i], p[0]...), p[1]...)
		}
	}
	for i, t := range []*tensor.Dense{l.params, l.targ, l.m, l.v} {
		a, off, err := l.locate(t)
		if err == nil {
			err = l.be.Upload(a, off, rawbytes.Of(flat[i]))
		}
		if err != nil {
			return fmt.Errorf("dqn: loading the device learner's state: %w", err)
		}
	}
	l.adamT, l.steps, l.lr = s.AdamT, s.GradientSteps, lr
	return nil
}
