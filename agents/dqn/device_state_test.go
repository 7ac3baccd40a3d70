//go:build trajring_cuda

package dqn

import (
	"bytes"
	"errors"
	"slices"
	"testing"
)

func sameNetwork(t *testing.T, what string, got, want *Network) {
	t.Helper()
	for l := range want.m.w {
		if !slices.Equal(got.m.w[l], want.m.w[l]) || !slices.Equal(got.m.b[l], want.m.b[l]) {
			t.Fatalf("%s: layer %d differs", what, l)
		}
	}
}

// TestDeviceLearnerStateRoundTrips: a DeviceLearner resumed from
// another's SaveState takes the next step bit for bit as the original
// does; Agent and DeviceLearner read each other's states exactly (same
// format); a state of other layer sizes is refused and changes nothing.
func TestDeviceLearnerStateRoundTrips(t *testing.T) {
	cfg := DefaultConfig()
	cfg.ObsDim, cfg.NumActions, cfg.BatchSize, cfg.Hidden, cfg.MaxGradNorm = 5, 3, 37, []int{40, 24}, 0.05
	p := newLearnerPair(t, cfg, 5)
	for range 2 {
		if err := p.dev.TrainStep(p.db); err != nil {
			t.Fatal(err)
		}
	}
	if err := p.dev.SetLearningRate(1e-3); err != nil {
		t.Fatal(err)
	}
	var st bytes.Buffer
	if err := p.dev.SaveState(&st); err != nil {
		t.Fatal(err)
	}
	saved := st.Bytes()
	cfg2 := cfg
	cfg2.Seed = 99
	resumed, err := NewDeviceLearner(cfg2, p.be)
	if err != nil {
		t.Fatal(err)
	}
	defer resumed.Close()
	if err := resumed.LoadState(bytes.NewReader(saved)); err != nil {
		t.Fatal(err)
	}
	if resumed.Steps() != 2 || resumed.lr != 1e-3 {
		t.Fatalf("resumed at step %d, rate %v; want 2, 0.001", resumed.Steps(), resumed.lr)
	}
	for _, l := range []*DeviceLearner{p.dev, resumed} {
		if err := l.UpdateTarget(); err != nil {
			t.Fatal(err)
		}
		if err := l.TrainStep(p.db); err != nil {
			t.Fatal(err)
		}
	}
	var a, b bytes.Buffer
	if err := p.dev.SaveState(&a); err != nil {
		t.Fatal(err)
	}
	if err := resumed.SaveState(&b); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a.Bytes(), b.Bytes()) {
		t.Fatal("the resumed learner's next step differs from the original's")
	}

	// Device to Agent and back.
	if err := p.cpu.LoadState(bytes.NewReader(saved)); err != nil {
		t.Fatal(err)
	}
	if p.cpu.Steps() != 2 || p.cpu.LearningRate() != 1e-3 {
		t.Fatalf("Agent resumed at step %d, rate %v", p.cpu.Steps(), p.cpu.LearningRate())
	}
	var fromAgent bytes.Buffer
	if err := p.cpu.SaveState(&fromAgent); err != nil {
		t.Fatal(err)
	}
	fresh, err := NewDeviceLearner(cfg2, p.be)
	if err != nil {
		t.Fatal(err)
	}
	defer fresh.Close()
	if err := fresh.LoadState(bytes.NewReader(fromAgent.Bytes())); err != nil {
		t.Fatal(err)
	}
	var again bytes.Buffer
	if err := fresh.SaveState(&again); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(again.Bytes(), saved) {
		t.Fatal("a state through Agent and back differs")
	}
	got, err := fresh.Network()
	if err != nil {
		t.Fatal(err)
	}
	sameNetwork(t, "network loaded from Agent's state", got, p.cpu.Network())

	// Other layer sizes: refused, nothing changes.
	other := cfg
	other.Hidden = []int{40, 25}
	small, err := New(other)
	if err != nil {
		t.Fatal(err)
	}
	var bad bytes.Buffer
	if err := small.SaveState(&bad); err != nil {
		t.Fatal(err)
	}
	for _, state := range [][]byte{bad.Bytes(), []byte("not gob"), saved[:len(saved)/2]} {
		if err := fresh.LoadState(bytes.NewReader(state)); !errors.Is(err, ErrConfig) {
			t.Fatalf("bad state: %v, want ErrConfig", err)
		}
	}
	var after bytes.Buffer
	if err := fresh.SaveState(&after); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(after.Bytes(), saved) {
		t.Fatal("a refused state changed the learner")
	}
}
