package dqn

import (
	"fmt"
	"io"
	"slices"

	"github.com/trajring/trajring/driver"
	"github.com/trajring/trajring/driver/envs"
	"github.com/trajring/trajring/tensorbuf"
	"gorgonia.org/tensor"
)

// Network is a Q-network's weights, apart from any agent: a copy taken
// with Agent.Network, the best network of a run (Result.Best), or one
// read back with ReadNetwork. It is not safe for concurrent use (its
// forward pass reuses scratch memory).
type Network struct {
	m       *mlp
	scratch [][]float32
}

// Network returns a copy of the agent's online network (not safe for
// concurrent use with Train).
func (a *Agent) Network() *Network { return &Network{m: a.online.clone()} }

// ReadNetwork reads a network written by Agent.Save or Network.Save,
// which must be all that is left in r (a model file), or a headerless
// file of the format before version 2. It refuses, with an error
// wrapping ErrConfig and changing nothing: anything that is not such a
// network; a damaged file (a header, length or CRC-32C that does not
// check out: also tensorbuf.ErrCorrupt); a layer size below 1, or
// weights and biases whose lengths are not the layer sizes' products;
// and weights or biases that are NaN or infinite (also ErrNonFinite).
// It is safe for concurrent use with other readers.
func ReadNetwork(r io.Reader) (*Network, error) {
	m, err := loadMLP(r)
	if err != nil {
		return nil, err
	}
	return &Network{m: m}, nil
}

// Save writes the network in the format of Agent.Save: a versioned
// header with the CRC-32C of the gob of the layer sizes and weights that
// follows (see ReadNetwork). It writes non-finite weights as they are;
// ReadNetwork refuses them.
func (n *Network) Save(w io.Writer) error { return n.m.save(w) }

// Dims returns the layer sizes: observation size, hidden layers, actions.
func (n *Network) Dims() []int { return slices.Clone(n.m.dims) }

// QFunc returns a driver.QFunc over the observation field name (float32,
// flattened to the network's input size per row).
func (n *Network) QFunc(name string) driver.QFunc {
	in, out := n.m.dims[0], n.m.dims[len(n.m.dims)-1]
	return func(obs map[string]*tensor.Dense, q []float32) error {
		d, ok := obs[name]
		if !ok || d.Dtype() != tensor.Float32 || d.Shape().TotalSize()%in != 0 {
			return fmt.Errorf("%w: observation %q missing or not float32 of %d per row", ErrConfig, name, in)
		}
		xs := d.Float32s()
		rows := len(xs) / in
		if len(q) < rows*out {
			return fmt.Errorf("%w: %d Q-values for %d rows of %d actions", ErrConfig, len(q), rows, out)
		}
		n.scratch = forward(n.m.dims, n.m.w, n.m.b, xs, rows, q[:rows*out], n.scratch)
		return nil
	}
}

// clone returns a deep copy of m.
func (m *mlp) clone() *mlp {
	c := &mlp{dims: slices.Clone(m.dims)}
	for l := range m.w {
		c.w, c.b = append(c.w, slices.Clone(m.w[l])), append(c.b, slices.Clone(m.b[l]))
	}
	return c
}

// GreedyReturns runs one greedy episode of q (numActions actions) on
// every row of env, from a reset, and returns each row's undiscounted
// return. It is not safe for concurrent use of one env or q.
func GreedyReturns(q driver.QFunc, numActions int, env *envs.CartPole, obsName, actName string) ([]float64, error) {
	pol, err := driver.NewGreedyPolicy(actName, env.ActionSpec()[0].DType, numActions, q)
	if err != nil {
		return nil, err
	}
	ts, err := env.Reset()
	if err != nil {
		return nil, err
	}
	n := env.BatchSize()
	done := make([]bool, n)
	rets := make([]float64, n)
	left := n
	for left > 0 {
		ps, err := pol.Action(ts, nil)
		if err != nil {
			return nil, err
		}
		if ts, err = env.Step(ps.Action); err != nil {
			return nil, err
		}
		for r := range n {
			if done[r] {
				continue
			}
			rets[r] += float64(ts.Reward[r])
			if ts.StepType[r] == tensorbuf.Last {
				done[r] = true
				left--
			}
		}
	}
	return rets, nil
}

// Evaluate runs one greedy episode of the agent's online network on
// every row of env (from a reset) and returns the mean undiscounted
// return.
func Evaluate(agent *Agent, env *envs.CartPole, obsName, actName string) (float64, error) {
	rets, err := GreedyReturns(agent.QFunc(obsName), agent.cfg.NumActions, env, obsName, actName)
	if err != nil {
		return 0, err
	}
	return mean(rets), nil
}

func mean(xs []float64) float64 {
	var s float64
	for _, x := range xs {
		s += x
	}
	return s / float64(len(xs))
}
