//go:build trajring_cuda

package dqn

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/trajring/trajring/gpu"
	"github.com/trajring/trajring/internal/rawbytes"
	"gorgonia.org/tensor"
)

// deviceTensor uploads v into a new arena of be (freed with the test)
// and returns a device tensor of dtype dt over it.
func deviceTensor(t testing.TB, be *gpu.Backend, dt tensor.Dtype, raw []byte, shape ...int) *tensor.Dense {
	t.Helper()
	a, err := be.Alloc(int64(len(raw)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = be.Free(a) })
	if err := be.Upload(a, 0, raw); err != nil {
		t.Fatal(err)
	}
	d, err := be.Tensor(a, 0, dt, shape...)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// maxRelDiff returns the largest |got-want| over the vector, relative to
// the largest |want| (absolute when that is 0).
func maxRelDiff(got, want []float32) float64 {
	var d, m float64
	for i := range want {
		d = max(d, math.Abs(float64(got[i])-float64(want[i])))
		m = max(m, math.Abs(float64(want[i])))
	}
	if m == 0 {
		return d
	}
	return d / m
}

type learnerPair struct {
	cpu   *Agent
	dev   *DeviceLearner
	be    *gpu.Backend
	hb    *Batch
	db    DeviceBatch
	valid []bool
}

func newLearnerPair(t testing.TB, cfg Config, seed uint64) *learnerPair {
	t.Helper()
	be, err := gpu.New()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = be.Close() })
	a, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	l, err := NewDeviceLearner(cfg, be)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	// A target network apart from the online one, as after some steps,
	// so that double DQN's choice of the next action matters.
	targ := newMLP(l.dims, seed+99)
	a.target.copyFrom(targ)
	var flat []float32
	for i := range targ.w {
		flat = append(append(flat, targ.w[i]...), targ.b[i]...)
	}
	if err := be.Upload(l.targArena, 0, rawbytes.Of(flat)); err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(seed, 28))
	B, d := cfg.BatchSize, cfg.ObsDim
	hb := a.NewBatch()
	w := make([]float64, B)
	valid := make([]bool, B)
	for i := range hb.Obs {
		hb.Obs[i], hb.NextObs[i] = float32(rng.NormFloat64()), float32(rng.NormFloat64())
	}
	for i := range B {
		hb.Actions[i] = rng.Int64N(int64(cfg.NumActions))
		hb.Reward[i] = float32(rng.NormFloat64() * 2)
		hb.Discount[i] = []float32{0, 0.99, 0.970299}[rng.IntN(3)]
		w[i] = 0.25 + rng.Float64()
		valid[i] = rng.IntN(8) != 0
		if valid[i] {
			hb.Weights[i] = float32(w[i])
		}
	}
	vb := make([]byte, B)
	for i, v := range valid {
		if v {
			vb[i] = 1
		}
	}
	db := DeviceBatch{
		Obs:      deviceTensor(t, be, tensor.Float32, rawbytes.Of(hb.Obs), B, d),
		NextObs:  deviceTensor(t, be, tensor.Float32, rawbytes.Of(hb.NextObs), B, d),
		Actions:  deviceTensor(t, be, tensor.Int64, rawbytes.Of(hb.Actions), B),
		Reward:   deviceTensor(t, be, tensor.Float32, rawbytes.Of(hb.Reward), B),
		Discount: deviceTensor(t, be, tensor.Float32, rawbytes.Of(hb.Discount), B),
		Weights:  deviceTensor(t, be, tensor.Float64, rawbytes.Of(w), B),
		Valid:    deviceTensor(t, be, tensor.Uint8, vb, B),
	}
	return &learnerPair{cpu: a, dev: l, be: be, hb: hb, db: db, valid: valid}
}

// TestDeviceLearnerMatchesAgent feeds one batch to Agent (gorgonia) and
// to DeviceLearner from the same initial weights and compares Q-values,
// TD errors, priorities, loss, gradients and the weights after one Adam
// step. The two add in different orders (and the CPU GEMM may fuse
// multiply-adds), so values agree to float32 rounding: within 1e-5 of
// the largest magnitude of each tensor (2e-5 for gradients, which go
// through a second and third product), and each weight's Adam update
// within 1e-3 of the learning rate where the CPU gradient is at least
// 1e-3 of the largest of its tensor. Below that the rounding of the
// gradient is a larger share of it, and Adam's first update,
// rate*g/(|g|+1e-8), moves with it (by up to 2 rates, should the sign
// flip); only that bound is checked there.
func TestDeviceLearnerMatchesAgent(t *testing.T) {
	tests := []struct {
		double  bool
		maxNorm float64
		hidden  []int
	}{
		{true, 10, []int{40, 24}},
		{true, 0.05, []int{40, 24}}, // clipped
		{false, -1, []int{17}},      // no clipping
		{true, 0.5, nil},            // linear
	}
	for i, tc := range tests {
		t.Run(fmt.Sprintf("double=%v,clip=%v,hidden=%v", tc.double, tc.maxNorm, tc.hidden), func(t *testing.T) {
			cfg := DefaultConfig()
			cfg.ObsDim, cfg.NumActions, cfg.BatchSize = 5, 3, 37
			cfg.Hidden, cfg.DoubleDQN, cfg.MaxGradNorm, cfg.Seed = tc.hidden, tc.double, tc.maxNorm, uint64(7+i)
			p := newLearnerPair(t, cfg, uint64(i))
			B, nA := cfg.BatchSize, cfg.NumActions
			before, err := p.dev.Network()
			if err != nil {
				t.Fatal(err)
			}
			if err := p.dev.TrainStep(p.db); err != nil {
				t.Fatal(err)
			}
			// Q(s,·), TD errors, priorities and loss before the step.
			qc := make([]float32, B*nA)
			if err := p.cpu.QValues(p.hb.Obs, B, qc); err != nil {
				t.Fatal(err)
			}
			qd := make([]float32, B*nA)
			if err := p.dev.download(qd, p.dev.h[len(p.dev.h)-1]); err != nil {
				t.Fatal(err)
			}
			if d := maxRelDiff(qd, qc); d > 1e-5 {
				t.Errorf("Q-values differ by %.3g of the largest", d)
			}
			if err := p.cpu.load(p.hb); err != nil {
				t.Fatal(err)
			}
			lossC, err := p.cpu.lossAndGrad()
			if err != nil {
				t.Fatal(err)
			}
			lossD, err := p.dev.Loss()
			if err != nil {
				t.Fatal(err)
			}
			if math.Abs(lossD-lossC) > 1e-5*math.Abs(lossC) {
				t.Errorf("loss %v, CPU %v", lossD, lossC)
			}
			tdC := p.cpu.tdV.Data().([]float32)
			tdD := make([]float32, B)
			if err := p.dev.download(tdD, p.dev.td); err != nil {
				t.Fatal(err)
			}
			if d := maxRelDiff(tdD, tdC); d > 1e-5 {
				t.Errorf("TD errors differ by %.3g of the largest", d)
			}
			copy(p.hb.TD, tdC)
			prC, prD := make([]float32, B), make([]float32, B)
			p.cpu.Priorities(p.hb, prC)
			if err := p.dev.download(prD, p.dev.prio); err != nil {
				t.Fatal(err)
			}
			if d := maxRelDiff(prD, prC); d > 1e-5 {
				t.Errorf("priorities differ by %.3g of the largest", d)
			}
			for i := range prD {
				if (prD[i] == 0) != !p.valid[i] {
					t.Fatalf("priority %d is %v, valid %v", i, prD[i], p.valid[i])
				}
			}
			// Gradients (before clipping), tensor by tensor.
			gd := make([]float32, p.dev.nparam)
			if err := p.dev.download(gd, p.dev.grads); err != nil {
				t.Fatal(err)
			}
			off := 0
			var gc [][]float32
			for _, par := range p.cpu.params {
				gv, err := par.Grad()
				if err != nil {
					t.Fatal(err)
				}
				g := gv.Data().([]float32)
				gc = append(gc, append([]float32(nil), g...))
				if d := maxRelDiff(gd[off:off+len(g)], g); d > 2e-5 {
					t.Errorf("gradient of %s differs by %.3g of the largest", par.Name(), d)
				}
				off += len(g)
			}
			// The global norm, and whether it clips (case 2 must).
			var sq float64
			for _, g := range gc {
				for _, v := range g {
					sq += float64(v) * float64(v)
				}
			}
			if cfg.MaxGradNorm > 0 {
				nd := make([]float64, 1)
				a, off, err := p.dev.locate(p.dev.norm)
				if err != nil {
					t.Fatal(err)
				}
				if err := p.be.Download(rawbytes.Of(nd), a, off); err != nil {
					t.Fatal(err)
				}
				if math.Abs(nd[0]-math.Sqrt(sq)) > 1e-5*math.Sqrt(sq) {
					t.Errorf("gradient norm %v, CPU %v", nd[0], math.Sqrt(sq))
				}
				if clips := nd[0] > cfg.MaxGradNorm; clips != (i == 1) {
					t.Fatalf("norm %v against %v: clipping %v in case %d", nd[0], cfg.MaxGradNorm, clips, i)
				}
			}
			// One Adam step each: compare the updates.
			if _, err := p.cpu.Train(p.hb); err != nil {
				t.Fatal(err)
			}
			after, err := p.dev.Network()
			if err != nil {
				t.Fatal(err)
			}
			cpuNet := p.cpu.Network()
			lr := cfg.LearningRate
			flipped := 0
			for l := range after.m.w {
				for k, pair := range [][3][]float32{{after.m.w[l], before.m.w[l], cpuNet.m.w[l]}, {after.m.b[l], before.m.b[l], cpuNet.m.b[l]}} {
					g := gc[2*l+k]
					var gmax float64
					for _, v := range g {
						gmax = max(gmax, math.Abs(float64(v)))
					}
					for j := range pair[0] {
						ud := float64(pair[0][j]) - float64(pair[1][j])
						uc := float64(pair[2][j]) - float64(pair[1][j])
						tol := 1e-3 * lr
						if math.Abs(float64(g[j])) <= 1e-3*gmax {
							tol = 2.001 * lr
							if math.Abs(ud-uc) > 1e-3*lr {
								flipped++
							}
						}
						if math.Abs(ud-uc) > tol+1e-7*math.Abs(float64(pair[1][j])) {
							t.Fatalf("layer %d %s %d: device update %.6g, CPU %.6g (gradient %.3g of max %.3g)",
								l, []string{"weight", "bias"}[k], j, ud, uc, g[j], gmax)
						}
					}
				}
			}
			t.Logf("updates of small gradients that differ by more than 1e-3 of the rate: %d", flipped)
			if p.dev.Steps() != 1 {
				t.Errorf("Steps %d", p.dev.Steps())
			}
		})
	}
}

// TestDeviceLearnerRefusesBadBatches: a batch of the wrong shape, dtype
// or memory is refused with ErrConfig, and nothing is launched.
func TestDeviceLearnerRefusesBadBatches(t *testing.T) {
	cfg := DefaultConfig()
	cfg.ObsDim, cfg.NumActions, cfg.BatchSize, cfg.Hidden = 3, 2, 8, []int{5}
	p := newLearnerPair(t, cfg, 1)
	other, err := gpu.New()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = other.Close() })
	foreign := deviceTensor(t, other, tensor.Float32, make([]byte, 4*24), 8, 3)
	hostObs := tensor.New(tensor.WithShape(8, 3), tensor.WithBacking(make([]float32, 24)))
	tests := []struct {
		name   string
		modify func(b *DeviceBatch)
	}{
		{"observation of another backend", func(b *DeviceBatch) { b.Obs = foreign }},
		{"observation in host memory", func(b *DeviceBatch) { b.NextObs = hostObs }},
		{"actions as float32", func(b *DeviceBatch) { b.Actions = b.Reward }},
		{"short rewards", func(b *DeviceBatch) { b.Reward = deviceTensor(t, p.be, tensor.Float32, make([]byte, 28), 7) }},
		{"no discounts", func(b *DeviceBatch) { b.Discount = nil }},
		{"weights as float32", func(b *DeviceBatch) { b.Weights = b.Reward }},
		{"valid as int64", func(b *DeviceBatch) { b.Valid = b.Actions }},
	}
	for _, tc := range tests {
		b := p.db
		tc.modify(&b)
		before := p.be.Launches()
		if err := p.dev.TrainStep(b); !errors.Is(err, ErrConfig) {
			t.Errorf("%s: %v, want ErrConfig", tc.name, err)
		}
		if n := p.be.Launches() - before; n != 0 || p.dev.Steps() != 0 {
			t.Errorf("%s: %d launches, %d steps after a refused batch", tc.name, n, p.dev.Steps())
		}
	}

}

// TestDeviceLearnerActsGreedily: QFunc gives Agent's Q-values up to
// rounding, and Act and ActHost pick the action of the
// largest Q-value of Agent's network (the same weights), for batches of
// observations that make the scratch grow, before and after a training
// step; rows whose two best Q-values lie within 1e-4 of each other (where
// rounding may decide) are skipped. Bad calls return ErrConfig.
func TestDeviceLearnerActsGreedily(t *testing.T) {
	cfg := DefaultConfig()
	cfg.ObsDim, cfg.NumActions, cfg.BatchSize, cfg.Hidden = 5, 4, 37, []int{40, 24}
	p := newLearnerPair(t, cfg, 3)
	rng := rand.New(rand.NewPCG(3, 4))
	nA := cfg.NumActions
	check := func(what string, obs []float32, n int, got []int64) {
		t.Helper()
		q := make([]float32, n*cfg.NumActions)
		if err := p.cpu.QValues(obs, n, q); err != nil {
			t.Fatal(err)
		}
		checked := 0
		for i := range n {
			row := q[i*cfg.NumActions : (i+1)*cfg.NumActions]
			best, second := 0, -1
			for j := 1; j < len(row); j++ {
				if row[j] > row[best] {
					best, second = j, best
				} else if second < 0 || row[j] > row[second] {
					second = j
				}
			}
			if math.Abs(float64(row[best]-row[second])) < 1e-4*(1+math.Abs(float64(row[best]))) {
				continue
			}
			checked++
			if got[i] != int64(best) {
				t.Fatalf("%s: row %d: action %d, Agent's greedy action %d (Q %v)", what, i, got[i], best, row)
			}
		}
		if checked < n/2 {
			t.Fatalf("%s: only %d of %d rows without a near tie", what, checked, n)
		}
	}
	for round, n := range []int{1, 5, 70, 3} {
		obs := randObs(rng, n*cfg.ObsDim)
		got := make([]int64, n)
		if err := p.dev.ActHost(obs, n, got); err != nil {
			t.Fatal(err)
		}
		check(fmt.Sprintf("ActHost of %d", n), obs, n, got)
		if round == 1 {
			if err := p.dev.TrainStep(p.db); err != nil {
				t.Fatal(err)
			}
			if _, err := p.cpu.Train(p.hb); err != nil {
				t.Fatal(err)
			}
		}
	}
	// QValuesHost and QFunc: Agent's Q-values up to rounding.
	obs := randObs(rng, 9*cfg.ObsDim)
	qd, qc := make([]float32, 9*nA), make([]float32, 9*nA)
	q := p.dev.QFunc("obs")
	if err := q(map[string]*tensor.Dense{"obs": tensor.New(tensor.WithShape(9, cfg.ObsDim), tensor.WithBacking(obs))}, qd); err != nil {
		t.Fatal(err)
	}
	if err := p.cpu.QValues(obs, 9, qc); err != nil {
		t.Fatal(err)
	}
	if d := maxRelDiff(qd, qc); d > 1e-5 {
		t.Errorf("QFunc's Q-values differ from Agent's by %.3g of the largest", d)
	}
	if err := q(map[string]*tensor.Dense{"obs": p.db.Obs}, qd); !errors.Is(err, ErrConfig) {
		t.Errorf("QFunc on a device tensor: %v, want ErrConfig", err)
	}
	if err := q(map[string]*tensor.Dense{}, qd); !errors.Is(err, ErrConfig) {
		t.Errorf("QFunc without the observation: %v, want ErrConfig", err)
	}
	got := make([]int64, cfg.BatchSize)
	if err := p.dev.Act(p.db.Obs, cfg.BatchSize, got); err != nil {
		t.Fatal(err)
	}
	check("Act on a device batch", p.hb.Obs, cfg.BatchSize, got)
	for _, err := range []error{
		p.dev.ActHost(make([]float32, 4), 1, got),
		p.dev.ActHost(make([]float32, 5), 1, nil),
		p.dev.Act(p.db.Actions, 1, got),
		p.dev.Act(p.db.Obs, cfg.BatchSize+1, make([]int64, 64)),
		p.dev.Act(tensor.New(tensor.WithShape(5), tensor.WithBacking(make([]float32, 5))), 1, got),
	} {
		if !errors.Is(err, ErrConfig) {
			t.Errorf("bad greedy call: %v, want ErrConfig", err)
		}
	}
}

func randObs(rng *rand.Rand, n int) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(rng.NormFloat64())
	}
	return v
}

// BenchmarkDeviceTrainStep times DeviceLearner.TrainStep with Sync (the
// device's work included), TrainStep alone (the host's time to queue a
// step) and Agent.Train on the same batch, at RL Zoo's CartPole settings
// (MLP 256x256, batch 64).
func BenchmarkDeviceTrainStep(b *testing.B) {
	cfg := DefaultConfig()
	cfg.ObsDim, cfg.NumActions = 4, 2
	p := newLearnerPair(b, cfg, 1)
	b.Run("device", func(b *testing.B) {
		for range b.N {
			if err := p.dev.TrainStep(p.db); err != nil {
				b.Fatal(err)
			}
			if err := p.be.Sync(); err != nil {
				b.Fatal(err)
			}
		}
	})
	// The host's part alone, reported as host-ns/step: the calling
	// thread's CPU time in TrainStep, which queues the step's launches
	// less any device work the stand-in runs meanwhile (it runs them at
	// the Sync); CPU time, not wall time, so that other processes on the
	// machine do not count.
	b.Run("device-queue", func(b *testing.B) {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		var host time.Duration
		for range b.N {
			t0, dev0 := threadCPU(b), standinTime()
			if err := p.dev.TrainStep(p.db); err != nil {
				b.Fatal(err)
			}
			host += threadCPU(b) - t0 - (standinTime() - dev0)
			if err := p.be.Sync(); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(host.Nanoseconds())/float64(b.N), "host-ns/step")
	})
	b.Run("agent", func(b *testing.B) {
		for range b.N {
			if _, err := p.cpu.Train(p.hb); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// threadCPU returns the calling thread's CPU time
// (CLOCK_THREAD_CPUTIME_ID).
func threadCPU(t testing.TB) time.Duration {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts); err != nil {
		t.Fatal(err)
	}
	return time.Duration(ts.Nano())
}

// standinTime is the stand-in driver's time running device work (0 on a
// real driver).
func standinTime() time.Duration {
	d, _ := gpu.StandinDeviceTime()
	return d
}
