package main

import (
	"bytes"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/trajring/trajring/agents/dqn"
	"github.com/trajring/trajring/driver/envs"
)

// saveNet writes an untrained network of obs inputs to dir/name.
func saveNet(t *testing.T, dir, name string, obs int) string {
	t.Helper()
	c := dqn.DefaultConfig()
	c.ObsDim, c.NumActions, c.Hidden, c.Seed = obs, 2, []int{8}, 5
	a, err := dqn.New(c)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := a.Save(&b); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestEval: eval plays a saved network for -episodes episodes from -seed
// (runs of up to 10,000 episodes, each on its own seed) and prints the
// mean, standard deviation, lowest and highest return of exactly those
// episodes; bad command lines exit 2, files that are not a CartPole
// network exit 1, each with one line.
func TestEval(t *testing.T) {
	dir := t.TempDir()
	model := saveNet(t, dir, "q.gob", 4)
	f, err := os.Open(model)
	if err != nil {
		t.Fatal(err)
	}
	net, err := dqn.ReadNetwork(f)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	returns := func(n int, seed uint64) []float64 {
		env, err := envs.NewCartPole(n, seed)
		if err != nil {
			t.Fatal(err)
		}
		obs := envs.CartPoleObservationName
		r, err := dqn.GreedyReturns(net.QFunc(obs), 2, env, obs, envs.CartPoleActionName)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	for _, tc := range []struct {
		episodes int
		seed     uint64
		rets     []float64
	}{
		{7, 3, returns(7, 3)},
		{10_001, 1, append(returns(10_000, 1), returns(1, 1+0x9e3779b97f4a7c15)...)},
	} {
		var st returnStats
		for _, r := range tc.rets {
			st.add(r)
		}
		want := fmt.Sprintf("%s (layers [4 8 2]): mean return over %d greedy episodes: %.1f (std %.1f, min %.0f, max %.0f)\n",
			model, tc.episodes, st.mean, st.std(), st.min, st.max)
		var o, e bytes.Buffer
		args := []string{"eval", model, "-episodes", fmt.Sprint(tc.episodes), "-seed", fmt.Sprint(tc.seed)}
		if code := run(args, &o, &e); code != 0 || o.String() != want {
			t.Errorf("%q: exit %d, stdout %q, stderr %q; want %q", args, code, o.String(), e.String(), want)
		}
	}
	junk := filepath.Join(dir, "junk.gob")
	if err := os.WriteFile(junk, []byte("not a network"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"eval"}, 2, "want one MODEL file (q.gob or best.gob), got 0 arguments"},
		{[]string{"eval", model, model}, 2, "want one MODEL file (q.gob or best.gob), got 2 arguments"},
		{[]string{"eval", model, "-episodes", "0"}, 2, "-episodes must be at least 1, got 0"},
		{[]string{"eval", model, "-seed", "-1"}, 2, `invalid argument "-1" for "--seed" flag`},
		{[]string{"eval", filepath.Join(dir, "none.gob")}, 1, "no such file or directory"},
		{[]string{"eval", junk}, 1, "junk.gob: dqn: invalid configuration: decoding a network"},
		{[]string{"eval", saveNet(t, dir, "three.gob", 3)}, 1, "a network of 3 inputs and 2 actions; CartPole-v1 has 4 and 2"},
	} {
		var o, e bytes.Buffer
		if code := run(tc.args, &o, &e); code != tc.code || strings.Count(e.String(), "\n") != 1 || !strings.Contains(e.String(), tc.want) {
			t.Errorf("%q: exit %d, stderr %q; want exit %d, one line containing %q", tc.args, code, e.String(), tc.code, tc.want)
		}
	}
}

// TestReturnStats: the running mean, population standard deviation,
// lowest and highest.
func TestReturnStats(t *testing.T) {
	for _, tc := range []struct {
		xs                  []float64
		mean, std, min, max float64
	}{
		{[]float64{500}, 500, 0, 500, 500},
		{[]float64{1, 2, 3, 4}, 2.5, math.Sqrt(1.25), 1, 4},
		{[]float64{9, 9, 9}, 9, 0, 9, 9},
		{[]float64{10, 30}, 20, 10, 10, 30},
	} {
		var s returnStats
		for _, x := range tc.xs {
			s.add(x)
		}
		if s.mean != tc.mean || math.Abs(s.std()-tc.std) > 1e-12 || s.min != tc.min || s.max != tc.max {
			t.Errorf("%v: mean %v std %v min %v max %v; want %v %v %v %v", tc.xs, s.mean, s.std(), s.min, s.max, tc.mean, tc.std, tc.min, tc.max)
		}
	}
}
