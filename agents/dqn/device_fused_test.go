//go:build trajring_cuda

package dqn

import (
	"bytes"
	"fmt"
	"testing"

	"gorgonia.org/tensor"
)

// rawOf copies the bytes of one of l's device tensors to the host.
func rawOf(t *testing.T, l *DeviceLearner, d *tensor.Dense) []byte {
	t.Helper()
	a, off, err := l.locate(d)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]byte, d.Shape().TotalSize()*int(d.Dtype().Size()))
	if err := l.be.Download(out, a, off); err != nil {
		t.Fatal(err)
	}
	return out
}

// state lists every tensor a step writes, by name.
func (l *DeviceLearner) stepTensors() map[string]*tensor.Dense {
	m := map[string]*tensor.Dense{"params": l.params, "grads": l.grads, "adam m": l.m, "adam v": l.v, "target": l.targ,
		"dq": l.dq, "td": l.td, "priorities": l.prio, "row losses": l.rl}
	if l.cfg.MaxGradNorm > 0 {
		m["norm"], m["scale"], m["partial sums"], m["norm state"] = l.norm, l.sc, l.partial, l.normState
	}
	for i := range l.h {
		m[fmt.Sprintf("h%d", i)], m[fmt.Sprintf("ht%d", i)] = l.h[i], l.ht[i]
		if l.cfg.DoubleDQN {
			m[fmt.Sprintf("hn%d", i)] = l.hn[i]
		}
	}
	return m
}

// TestDeviceLearnerFusedIsSeparate: the fused training step (Gemm3 for
// a layer's forward passes, the last one's with the TD loss as a TDHead,
// GemmBack for its gradients and the norm: 2L+1 launches) writes the same bytes as the separate launches (Gemm
// with epilogues, ColSum, GradNorm's two: 6L+2 with double DQN) into
// every tensor a step writes (weights, gradients, Adam's moments,
// activations, TD outputs, norm), step after step, with and without
// double DQN, clipping and hidden layers; and counts its launches.
func TestDeviceLearnerFusedIsSeparate(t *testing.T) {
	tests := []struct {
		double  bool
		maxNorm float64
		hidden  []int
	}{
		{true, 10, []int{40, 24}},
		{true, 0.05, []int{40, 24}}, // clipped
		{false, -1, []int{17}},      // no clipping
		{true, 0.5, nil},            // linear
		{true, 1, []int{64, 64}},
	}
	for i, tc := range tests {
		t.Run(fmt.Sprintf("double=%v,clip=%v,hidden=%v", tc.double, tc.maxNorm, tc.hidden), func(t *testing.T) {
			cfg := DefaultConfig()
			cfg.ObsDim, cfg.NumActions, cfg.BatchSize = 5, 3, 37
			cfg.Hidden, cfg.DoubleDQN, cfg.MaxGradNorm, cfg.Seed = tc.hidden, tc.double, tc.maxNorm, uint64(7+i)
			p := newLearnerPair(t, cfg, uint64(i))
			fused := p.dev
			sep, err := NewDeviceLearner(cfg, p.be)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = sep.Close() })
			sep.separate = true
			if err := p.be.Copy(sep.targArena, 0, fused.targArena, 0, 4*int64(fused.nparam)); err != nil {
				t.Fatal(err)
			}
			L := len(fused.dims) - 1
			for step := range 4 {
				if step == 2 {
					for _, l := range []*DeviceLearner{fused, sep} {
						if err := l.UpdateTarget(); err != nil {
							t.Fatal(err)
						}
					}
				}
				l0 := p.be.Launches()
				if err := fused.TrainStep(p.db); err != nil {
					t.Fatal(err)
				}
				l1 := p.be.Launches()
				if err := sep.TrainStep(p.db); err != nil {
					t.Fatal(err)
				}
				l2 := p.be.Launches()
				want := int64(2*L + 1)
				if L == 1 {
					want = 4 // no hidden layer: the last layer reads the batch, no TDHead
				}
				if l1-l0 != want {
					t.Errorf("fused step: %d launches, want %d", l1-l0, want)
				}
				passes, norm := int64(2), int64(0)
				if tc.double {
					passes = 3
				}
				if tc.maxNorm > 0 {
					norm = 2
				}
				if want := passes*int64(L) + 1 + int64(3*L-1) + norm + 1; l2-l1 != want {
					t.Errorf("separate step: %d launches, want %d", l2-l1, want)
				}
				ft, st := fused.stepTensors(), sep.stepTensors()
				for name, d := range ft {
					if !bytes.Equal(rawOf(t, fused, d), rawOf(t, sep, st[name])) {
						t.Fatalf("step %d: %s differs between the fused and the separate launches", step, name)
					}
				}
			}
		})
	}
}
