package dqn

import (
	"bytes"
	"context"
	"encoding/gob"
	"hash/crc32"
	"os"
	"path/filepath"
	"testing"

	"github.com/trajring/trajring/driver/envs"
	"github.com/trajring/trajring/tensorbuf"
)

// netBytes is a network's Save output.
func netBytes(t *testing.T, save func(w *bytes.Buffer) error) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := save(&b); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// TestBestNetwork: a run keeps a copy of the network of its best
// evaluation (the first of equals) with its env steps and mean; the final
// evaluations of the best and the last network run on the same fresh
// episodes (the evaluation seed after the periodic ones); a resume keeps
// the checkpoint's best; without evaluations there is no best and the
// last network is the one evaluated.
func TestBestNetwork(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "run")
	c := smallRun(dir, 2000, 400)
	c.EvalEpisodes = 5
	nets := map[int64][]byte{} // the online network at each checkpoint (every evaluation)
	var evals []Progress
	c.Progress = func(p Progress) {
		if p.EvalReturn != nil {
			evals = append(evals, p)
		}
	}
	var at800 string
	c.afterCheckpoint = func(gen uint64, a *Agent, _ *tensorbuf.Buffer) {
		nets[int64(gen)*400] = netBytes(t, func(w *bytes.Buffer) error { return a.Save(w) })
		if gen == 2 {
			at800 = filepath.Join(t.TempDir(), "at800")
			copyDir(t, dir, at800)
		}
	}
	res, err := RunCartPole(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	if len(evals) != 5 {
		t.Fatalf("%d evaluations, want 5 (every 400 env steps)", len(evals))
	}
	bestOf := func(ps []Progress) (int64, float64) {
		at, best := int64(-1), 0.0
		for _, p := range ps {
			if at < 0 || *p.EvalReturn > best {
				at, best = p.EnvSteps, *p.EvalReturn
			}
		}
		return at, best
	}
	at, best := bestOf(evals)
	t.Logf("evaluations %v; best %.1f at %d; final: best %.1f, last %.1f", func() (r []float64) {
		for _, p := range evals {
			r = append(r, *p.EvalReturn)
		}
		return
	}(), best, at, res.EvalReturn, res.LastEvalReturn)
	if res.BestEnvSteps != at || res.BestEvalReturn != best || res.Best == nil {
		t.Fatalf("best %v at %d, want %v at %d", res.BestEvalReturn, res.BestEnvSteps, best, at)
	}
	if got := netBytes(t, func(w *bytes.Buffer) error { return res.Best.Save(w) }); !bytes.Equal(got, nets[at]) {
		t.Fatalf("Best is not the network evaluated at %d env steps", at)
	}
	final := func(q *Network, a *Agent) float64 {
		k := uint64(5) // the periodic evaluations before the final ones
		env, err := envs.NewCartPole(c.EvalEpisodes, c.Seed+1_000_003+k*0x9e3779b97f4a7c15)
		if err != nil {
			t.Fatal(err)
		}
		qf, nA := a.QFunc(envs.CartPoleObservationName), 2
		if q != nil {
			qf = q.QFunc(envs.CartPoleObservationName)
		}
		rets, err := GreedyReturns(qf, nA, env, envs.CartPoleObservationName, envs.CartPoleActionName)
		if err != nil {
			t.Fatal(err)
		}
		return mean(rets)
	}
	if b, l := final(res.Best, nil), final(nil, res.Agent); res.EvalReturn != b || res.LastEvalReturn != l {
		t.Fatalf("final evaluations: best %v, last %v; want %v, %v", res.EvalReturn, res.LastEvalReturn, b, l)
	}

	// A resume of the checkpoint at 800 env steps with nothing left to
	// train keeps that checkpoint's best.
	rc := smallRun(at800, 800, 400)
	rc.EvalEpisodes, rc.Resume = 5, true
	rres, err := RunCartPole(context.Background(), rc)
	if err != nil {
		t.Fatal(err)
	}
	at, best = bestOf(evals[:2])
	if rres.BestEnvSteps != at || rres.BestEvalReturn != best ||
		!bytes.Equal(netBytes(t, func(w *bytes.Buffer) error { return rres.Best.Save(w) }), nets[at]) {
		t.Fatalf("resumed at 800: best %v at %d, want %v at %d (the checkpoint's)", rres.BestEvalReturn, rres.BestEnvSteps, best, at)
	}

	nc := smallRun("", 600, 0)
	nc.EvalEvery = 0
	nres, err := RunCartPole(context.Background(), nc)
	if err != nil {
		t.Fatal(err)
	}
	if nres.Best != nil || nres.BestEnvSteps != -1 || nres.EvalReturn != nres.LastEvalReturn {
		t.Fatalf("without evaluations: best %v at %d, final %v and %v", nres.Best, nres.BestEnvSteps, nres.EvalReturn, nres.LastEvalReturn)
	}
}

// TestReadStateV1: a learner state of the format before best networks and
// learning-rate schedules loads as a run with a constant learning rate,
// no best network, and "no evaluation" (-1 then) as nil.
func TestReadStateV1(t *testing.T) {
	type v1Progress struct {
		EnvSteps   int64
		EvalReturn float64
	}
	type v1State struct {
		Format   string
		Config   TrainConfig
		Progress v1Progress
		History  []v1Progress
	}
	cfg := DefaultTrainConfig()
	cfg.LearningRateEnd = 0 // a v1 run had no such field
	var b bytes.Buffer
	err := gob.NewEncoder(&b).Encode(v1State{Format: loopFormatV1, Config: cfg, Progress: v1Progress{512, -1},
		History: []v1Progress{{256, -1}, {512, 250}}})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, StateFile(1)), b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	st, err := readState(dir, manifest{State: StateFile(1), StateBytes: int64(b.Len()), StateCRC: crc32.Checksum(b.Bytes(), castagnoli)})
	if err != nil {
		t.Fatal(err)
	}
	h := st.History
	if st.Format != loopFormat || st.Config.LearningRateEnd != 2.3e-3 || st.BestEnvSteps != -1 || st.Best != nil ||
		len(h) != 2 || h[0].EvalReturn != nil || h[1].EvalReturn == nil || *h[1].EvalReturn != 250 ||
		h[1].LearningRate != 2.3e-3 || st.Progress.EvalReturn != nil {
		t.Fatalf("v1 state read as %+v", st)
	}
}

// TestStopOnReturn: the first evaluation whose mean reaches StopOnReturn
// ends the run there, with a checkpoint; a resume of the stopped run with
// more steps trains no further.
func TestStopOnReturn(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "run")
	c := smallRun(dir, 2000, 1000)
	c.StopOnReturn = 1 // every episode returns at least 1
	var rounds int
	c.Progress = func(Progress) { rounds++ }
	res, err := RunCartPole(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Stopped || res.Last.EnvSteps != 400 || rounds != 4 || res.BestEnvSteps != 400 {
		t.Fatalf("stopped %v at %d env steps after %d rounds, best at %d; want a stop at the evaluation at 400",
			res.Stopped, res.Last.EnvSteps, rounds, res.BestEnvSteps)
	}
	ck, err := ReadCheckpoint(dir)
	if err != nil || ck.Progress.EnvSteps != 400 {
		t.Fatalf("checkpoint of the stopped run: %+v, %v", ck, err)
	}
	c.Steps, c.Resume, rounds = 4000, true, 0
	rres, err := RunCartPole(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	if !rres.Stopped || rres.Last.EnvSteps != 400 || rounds != 0 || rres.Last.GradientSteps != res.Last.GradientSteps {
		t.Fatalf("resume of a stopped run: stopped %v at %d env steps, %d rounds", rres.Stopped, rres.Last.EnvSteps, rounds)
	}
	c = smallRun("", 800, 0)
	c.StopOnReturn = 0
	if res, err := RunCartPole(context.Background(), c); err != nil || res.Stopped || res.Last.EnvSteps != 800 {
		t.Fatalf("StopOnReturn 0: %v, %+v", err, res)
	}
}
