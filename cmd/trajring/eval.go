package main

import (
	"fmt"
	"io"
	"math"
	"os"

	"github.com/spf13/cobra"
	"github.com/trajring/trajring/agents/dqn"
	"github.com/trajring/trajring/driver/envs"
)

// evalChunk bounds the episodes one evaluation pass runs at once (one
// environment and forward-pass row each), so that any -episodes runs in
// bounded memory.
const evalChunk = 10_000

// newEvalCmd returns the eval command.
func newEvalCmd() *cobra.Command {
	var episodes int
	var seed uint64
	cmd := &cobra.Command{
		Use:   "eval MODEL",
		Short: "play a saved DQN network greedily on CartPole-v1 (mean and std of the return)",
		Long: `Plays the network in MODEL (q.gob or best.gob from trajring train) greedily on
CartPole-v1 for -episodes episodes, as RL Zoo's enjoy script does, and prints
the mean and standard deviation of the undiscounted return, with the lowest and
highest. Episodes start from states drawn from -seed (runs of up to 10,000
episodes at a time, each run on its own seed), so a seed gives the same result
every time.`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 1 {
				return usageErrorf("want one MODEL file (q.gob or best.gob), got %d arguments", len(args))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if episodes < 1 {
				return usageErrorf("-episodes must be at least 1, got %d", episodes)
			}
			return runEval(args[0], episodes, seed, cmd.OutOrStdout())
		},
	}
	fs := cmd.Flags()
	fs.SortFlags = false
	fs.IntVar(&episodes, "episodes", 100, "greedy episodes")
	fs.Uint64Var(&seed, "seed", 1, "seed of the episodes' starting states")
	return cmd
}

// runEval loads the network and prints its returns' summary.
func runEval(path string, episodes int, seed uint64, stdout io.Writer) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	net, err := dqn.ReadNetwork(f)
	f.Close()
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	obs, act := envs.CartPoleObservationName, envs.CartPoleActionName
	dims := net.Dims()
	if dims[0] != 4 || dims[len(dims)-1] != 2 {
		return fmt.Errorf("%s: a network of %d inputs and %d actions; CartPole-v1 has 4 and 2", path, dims[0], dims[len(dims)-1])
	}
	var st returnStats
	for k := 0; st.n < episodes; k++ {
		env, err := envs.NewCartPole(min(episodes-st.n, evalChunk), seed+uint64(k)*0x9e3779b97f4a7c15)
		if err != nil {
			return err
		}
		rets, err := dqn.GreedyReturns(net.QFunc(obs), 2, env, obs, act)
		if err != nil {
			return err
		}
		for _, r := range rets {
			st.add(r)
		}
	}
	fmt.Fprintf(stdout, "%s (layers %v): mean return over %d greedy episodes: %.1f (std %.1f, min %.0f, max %.0f)\n",
		path, dims, episodes, st.mean, st.std(), st.min, st.max)
	return nil
}

// returnStats is the running mean, standard deviation (Welford's
// update), lowest and highest of returns, in constant memory.
type returnStats struct {
	n        int
	mean, m2 float64
	min, max float64
}

func (s *returnStats) add(x float64) {
	if s.n == 0 {
		s.min, s.max = x, x
	}
	s.n++
	d := x - s.mean
	s.mean += d / float64(s.n)
	s.m2 += d * (x - s.mean)
	s.min, s.max = min(s.min, x), max(s.max, x)
}

// std is the population standard deviation, as numpy's std (which RL
// Zoo reports).
func (s *returnStats) std() float64 { return math.Sqrt(s.m2 / float64(s.n)) }
