package dqn

import (
	"encoding/gob"
	"fmt"
	"io"
	"math"
	"slices"
)

// agentState is the format of SaveState: everything an Agent needs to
// continue training as if it had not stopped.
type agentState struct {
	Format                     string
	Dims                       []int
	Online, OnlineB            [][]float32
	Target, TargetB            [][]float32
	AdamM, AdamV               [][]float32 // per parameter: w0, b0, w1, b1, ...
	AdamT, GradientSteps       int64
	LearningRate, Beta1, Beta2 float64
	// CurrentLR is Adam's rate when saved (SetLearningRate), when
	// HasCurrentLR: states written before schedules existed lack both
	// (gob leaves zeros out) and ran at LearningRate.
	CurrentLR    float64
	HasCurrentLR bool
}

const stateFormat = "trajring-dqn-agent/1"

// SaveState writes the agent's whole training state (gob): the online and
// target networks, Adam's first and second moments and step count, and
// the gradient-step count, and the learning rate of the next step.
// LoadState on an agent of the same layer sizes
// restores it, after which Train computes exactly what this agent's Train
// would have. It is not safe for concurrent use with Train.
func (a *Agent) SaveState(w io.Writer) error {
	s := agentState{
		Format: stateFormat, Dims: a.dims,
		Online: a.online.w, OnlineB: a.online.b, Target: a.target.w, TargetB: a.target.b,
		AdamM: a.opt.m, AdamV: a.opt.v, AdamT: a.opt.t, GradientSteps: a.steps,
		LearningRate: a.cfg.LearningRate, Beta1: a.opt.beta1, Beta2: a.opt.beta2, CurrentLR: a.opt.lr, HasCurrentLR: true,
	}
	if err := gob.NewEncoder(w).Encode(s); err != nil {
		return fmt.Errorf("dqn: saving the agent state: %w", err)
	}
	return nil
}

// LoadState reads a state written by SaveState into the agent. A state of
// other layer sizes, learning rate or format, or one that does not
// decode, returns an error wrapping ErrConfig and changes nothing. It is
// not safe for concurrent use.
func (a *Agent) LoadState(r io.Reader) error {
	var s agentState
	if err := gob.NewDecoder(r).Decode(&s); err != nil {
		return fmt.Errorf("%w: decoding an agent state: %w", ErrConfig, err)
	}
	if s.Format != stateFormat {
		return fmt.Errorf("%w: not a %s agent state (format %q)", ErrConfig, stateFormat, s.Format)
	}
	if !slices.Equal(s.Dims, a.dims) {
		return fmt.Errorf("%w: agent state of layer sizes %v, this agent has %v", ErrConfig, s.Dims, a.dims)
	}
	if s.LearningRate != a.cfg.LearningRate || s.Beta1 != a.opt.beta1 || s.Beta2 != a.opt.beta2 {
		return fmt.Errorf("%w: agent state of learning rate %g (Adam betas %g, %g), this agent has %g (%g, %g)",
			ErrConfig, s.LearningRate, s.Beta1, s.Beta2, a.cfg.LearningRate, a.opt.beta1, a.opt.beta2)
	}
	if s.AdamT < 0 || s.GradientSteps < 0 {
		return fmt.Errorf("%w: agent state with negative step counts", ErrConfig)
	}
	lr := s.LearningRate
	if s.HasCurrentLR {
		if !(s.CurrentLR >= 0) || math.IsInf(s.CurrentLR, 1) {
			return fmt.Errorf("%w: agent state with learning rate %g", ErrConfig, s.CurrentLR)
		}
		lr = s.CurrentLR
	}
	nl := len(a.dims) - 1
	sizesOK := func(ws, bs [][]float32) bool {
		if len(ws) != nl || len(bs) != nl {
			return false
		}
		for l := range nl {
			if len(ws[l]) != a.dims[l]*a.dims[l+1] || len(bs[l]) != a.dims[l+1] {
				return false
			}
		}
		return true
	}
	if !sizesOK(s.Online, s.OnlineB) || !sizesOK(s.Target, s.TargetB) || len(s.AdamM) != len(a.opt.m) || len(s.AdamV) != len(a.opt.v) {
		return fmt.Errorf("%w: agent state has layers of the wrong sizes", ErrConfig)
	}
	for i := range a.opt.m {
		if len(s.AdamM[i]) != len(a.opt.m[i]) || len(s.AdamV[i]) != len(a.opt.v[i]) {
			return fmt.Errorf("%w: agent state has Adam moments of the wrong sizes", ErrConfig)
		}
	}
	for l := range nl {
		copy(a.online.w[l], s.Online[l]) // the graph's own tensors
		copy(a.online.b[l], s.OnlineB[l])
		copy(a.target.w[l], s.Target[l])
		copy(a.target.b[l], s.TargetB[l])
	}
	for i := range a.opt.m {
		copy(a.opt.m[i], s.AdamM[i])
		copy(a.opt.v[i], s.AdamV[i])
	}
	a.opt.t, a.steps, a.opt.lr = s.AdamT, s.GradientSteps, lr
	return nil
}
