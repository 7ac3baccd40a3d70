package dqn

import (
	"bytes"
	"errors"
	"slices"
	"testing"
)

// trainN trains a on n batches from seeds from, from+1, ..., updating the
// target every 5 steps, and returns the losses and TD errors.
func trainN(t *testing.T, a *Agent, from uint64, n int) []float32 {
	t.Helper()
	var out []float32
	for i := range n {
		b := randomBatch(a, from+uint64(i))
		loss, err := a.Train(b)
		if err != nil {
			t.Fatal(err)
		}
		out = append(append(out, float32(loss)), b.TD...)
		if a.Steps()%5 == 0 {
			a.UpdateTarget()
		}
	}
	return out
}

func weights(a *Agent) []float32 {
	var out []float32
	for l := range a.online.w {
		out = append(append(append(append(out, a.online.w[l]...), a.online.b[l]...), a.target.w[l]...), a.target.b[l]...)
	}
	return out
}

// TestAgentStateResumesTraining: an agent restored with LoadState (into an
// agent of another seed) trains on bit for bit as the saved one does:
// weights, target, Adam moments and step counts all carry over. Loading
// only the networks (Adam restarted) gives other weights, so the test sees
// lost moments.
func TestAgentStateResumesTraining(t *testing.T) {
	cfg := testConfig(3, 2, 6, 8, 8)
	cfg.Seed = 4
	a, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	trainN(t, a, 100, 12)
	var state bytes.Buffer
	if err := a.SaveState(&state); err != nil {
		t.Fatal(err)
	}
	saved := state.Bytes()
	cfg.Seed = 77
	b, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.LoadState(bytes.NewReader(saved)); err != nil {
		t.Fatal(err)
	}
	if b.Steps() != 12 || !slices.Equal(weights(a), weights(b)) {
		t.Fatalf("restored: %d steps, weights equal %v", b.Steps(), slices.Equal(weights(a), weights(b)))
	}
	var again bytes.Buffer
	if err := b.SaveState(&again); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(again.Bytes(), saved) {
		t.Fatal("saving a restored agent gives other bytes")
	}
	wantTD := trainN(t, a, 200, 15)
	gotTD := trainN(t, b, 200, 15)
	if !slices.Equal(gotTD, wantTD) || !slices.Equal(weights(a), weights(b)) || b.Steps() != 27 {
		t.Fatal("the restored agent trains differently from the saved one")
	}
	// Without Adam's state the continuation differs.
	c, _ := New(cfg)
	if err := c.LoadState(bytes.NewReader(saved)); err != nil {
		t.Fatal(err)
	}
	c.opt = newAdam(c.cfg.LearningRate, []int{3 * 8, 8, 8 * 8, 8, 8 * 2, 2})
	trainN(t, c, 200, 15)
	if slices.Equal(weights(a), weights(c)) {
		t.Fatal("restarting Adam did not change the weights: the test cannot see lost moments")
	}
}

// TestAgentLoadStateRejects: states of other layer sizes, learning rate or
// format, and garbage, are refused with ErrConfig and change nothing.
func TestAgentLoadStateRejects(t *testing.T) {
	cfg := testConfig(3, 2, 4, 8)
	cfg.DoubleDQN, cfg.Seed = false, 1
	mk := func(c Config) []byte {
		a, err := New(c)
		if err != nil {
			t.Fatal(err)
		}
		trainN(t, a, 1, 2)
		var buf bytes.Buffer
		if err := a.SaveState(&buf); err != nil {
			t.Fatal(err)
		}
		return buf.Bytes()
	}
	wider, otherLR := cfg, cfg
	wider.Hidden = []int{9}
	otherLR.LearningRate = 1e-3
	var net bytes.Buffer
	a, _ := New(cfg)
	if err := a.Save(&net); err != nil {
		t.Fatal(err)
	}
	good := mk(cfg)
	for name, data := range map[string][]byte{
		"other layer sizes":    mk(wider),
		"other learning rate":  mk(otherLR),
		"a network, not state": net.Bytes(),
		"garbage":              []byte("not gob"),
		"truncated":            good[:len(good)/2],
		"empty":                nil,
	} {
		before := weights(a)
		if err := a.LoadState(bytes.NewReader(data)); !errors.Is(err, ErrConfig) {
			t.Errorf("%s: %v, want ErrConfig", name, err)
		}
		if !slices.Equal(before, weights(a)) || a.Steps() != 0 || a.opt.t != 0 {
			t.Errorf("%s: a refused state changed the agent", name)
		}
	}
}
