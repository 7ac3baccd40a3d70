package dqn

import (
	"bytes"
	"math"
	"math/rand/v2"
	"testing"
)

// testConfig is DefaultConfig with the given sizes (hidden layers after
// the batch size).
func testConfig(obs, actions, batch int, hidden ...int) Config {
	c := DefaultConfig()
	c.ObsDim, c.NumActions, c.BatchSize, c.Hidden = obs, actions, batch, hidden
	return c
}

func randomBatch(a *Agent, seed uint64) *Batch {
	rng := rand.New(rand.NewPCG(seed, 1))
	b := a.NewBatch()
	for i := range b.Obs {
		b.Obs[i] = float32(rng.NormFloat64())
		b.NextObs[i] = float32(rng.NormFloat64())
	}
	for i := range b.Actions {
		b.Actions[i] = int64(rng.IntN(a.cfg.NumActions))
		// Rewards spread so that some |TD| fall in each Huber regime.
		b.Reward[i] = float32(4 * rng.NormFloat64())
		b.Discount[i] = float32(rng.Float64())
		b.Weights[i] = float32(0.2 + rng.Float64())
	}
	b.Weights[0] = 0 // a masked-out transition
	return b
}

// TestLossGradientFiniteDifference checks gorgonia's gradient of the
// weighted Huber loss against central differences on every parameter
// of a tiny network, and the TD errors against the plain-Go forward pass.
func TestLossGradientFiniteDifference(t *testing.T) {
	for _, double := range []bool{false, true} {
		cfg := testConfig(3, 2, 6, 5)
		cfg.DoubleDQN, cfg.Seed = double, 4
		a, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		// Make target and online differ.
		for l := range a.target.w {
			for i := range a.target.w[l] {
				a.target.w[l][i] *= 1.5
			}
		}
		b := randomBatch(a, 9)
		if err := a.load(b); err != nil {
			t.Fatal(err)
		}
		loss0, err := a.lossAndGrad()
		if err != nil {
			t.Fatal(err)
		}
		// The TD errors equal the plain-Go Q(s,a) minus the targets, and the
		// loss the weighted mean Huber of them.
		q := make([]float32, 6*2)
		if err := a.QValues(b.Obs, 6, q); err != nil {
			t.Fatal(err)
		}
		td := a.tdV.Data().([]float32)
		y := a.yT.Float32s()
		var want float64
		huberRegimes := [2]int{}
		for i := range 6 {
			d := float64(q[i*2+int(b.Actions[i])] - y[i])
			if math.Abs(float64(td[i])-d) > 1e-5 {
				t.Fatalf("double %v: td[%d] = %v, plain forward gives %v", double, i, td[i], d)
			}
			h := 0.5 * d * d
			if math.Abs(d) > 1 {
				h = math.Abs(d) - 0.5
				huberRegimes[1]++
			} else {
				huberRegimes[0]++
			}
			want += float64(b.Weights[i]) * h / 6
		}
		if math.Abs(loss0-want) > 1e-5*math.Max(1, want) || huberRegimes[0] == 0 || huberRegimes[1] == 0 {
			t.Fatalf("double %v: loss %v, want %v (regimes %v)", double, loss0, want, huberRegimes)
		}
		var grads [][]float32
		for _, p := range a.params {
			g, err := p.Grad()
			if err != nil {
				t.Fatal(err)
			}
			grads = append(grads, append([]float32(nil), g.Data().([]float32)...))
		}
		const eps = 1e-3
		checked := 0
		for pi, p := range a.params {
			w := p.Value().Data().([]float32)
			for i := range w {
				orig := w[i]
				w[i] = orig + eps
				lp, err := a.lossAndGrad()
				if err != nil {
					t.Fatal(err)
				}
				w[i] = orig - eps
				lm, err := a.lossAndGrad()
				if err != nil {
					t.Fatal(err)
				}
				w[i] = orig
				num := (lp - lm) / (2 * eps)
				ana := float64(grads[pi][i])
				if math.Abs(num-ana) > 2e-3+2e-2*math.Abs(ana) {
					t.Errorf("double %v: %s[%d]: gradient %v, finite difference %v", double, p.Name(), i, ana, num)
				}
				checked++
			}
		}
		if checked != 3*5+5+5*2+2 {
			t.Fatalf("checked %d parameters", checked)
		}
	}
}

// TestTrainStepLowersLossAndSaves: repeated steps on one batch lower the
// loss; a saved network gives the agent's Q-values.
func TestTrainStepLowersLossAndSaves(t *testing.T) {
	cfg := testConfig(4, 2, 8, 16, 16)
	cfg.LearningRate, cfg.DoubleDQN, cfg.Seed = 1e-2, false, 2
	a, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	b := randomBatch(a, 3)
	first, err := a.Train(b)
	if err != nil {
		t.Fatal(err)
	}
	var last float64
	for range 50 {
		if last, err = a.Train(b); err != nil {
			t.Fatal(err)
		}
	}
	if !(last < first/2) || a.Steps() != 51 {
		t.Fatalf("loss %v after 50 steps, first %v, steps %d", last, first, a.Steps())
	}
	var buf bytes.Buffer
	if err := a.Save(&buf); err != nil {
		t.Fatal(err)
	}
	q, dims, err := LoadNetwork(&buf)
	if err != nil {
		t.Fatal(err)
	}
	got, want := make([]float32, 16), make([]float32, 16)
	q(b.Obs, 8, got)
	if err := a.QValues(b.Obs, 8, want); err != nil {
		t.Fatal(err)
	}
	if len(dims) != 4 || dims[1] != 16 {
		t.Fatalf("dims %v", dims)
	}
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("loaded Q %v, agent %v", got, want)
		}
	}
}

// BenchmarkTrainStep times one gradient step of DefaultConfig on
// CartPole's sizes (the step scripts/learner_step.py times in PyTorch).
// It also reports the process's CPU time per step (cpu-ns/op, every
// thread counted), which a machine shared with other work disturbs less
// than the wall time.
func BenchmarkTrainStep(b *testing.B) {
	cfg := DefaultConfig()
	cfg.ObsDim, cfg.NumActions, cfg.Seed = 4, 2, 1
	a, err := New(cfg)
	if err != nil {
		b.Fatal(err)
	}
	bt := randomBatch(a, 1)
	c0 := cpuTime()
	for b.Loop() {
		if _, err := a.Train(bt); err != nil {
			b.Fatal(err)
		}
	}
	if c := cpuTime() - c0; c > 0 {
		b.ReportMetric(float64(c.Nanoseconds())/float64(b.N), "cpu-ns/op")
	}
}
