package main

import (
	"bytes"
	"fmt"

	"github.com/trajring/trajring/agents/dqn"
	"github.com/trajring/trajring/driver"
	"github.com/trajring/trajring/tensorbuf"
	"gorgonia.org/tensor"
)

// paramsPolicy decodes policy parameters published by the learner (a DQN
// Q-network as agents/dqn's Agent.Save writes it: trajring train's q.gob)
// and returns the epsilon-greedy policy over it for the observation field
// obs (float32, flattened) and the discrete action field act (Min 0,
// Max n-1). A network whose input or output size does not match the
// fields is refused.
func paramsPolicy(blob []byte, obs, act tensorbuf.Field, epsilon float64, seed uint64) (driver.Policy, string, error) {
	q, dims, err := dqn.LoadNetwork(bytes.NewReader(blob))
	if err != nil {
		return nil, "", fmt.Errorf("decoding the DQN network: %w", err)
	}
	obsDim := 1
	for _, d := range obs.Shape {
		obsDim *= d
	}
	if len(act.Max) != 1 {
		return nil, "", fmt.Errorf("action %q is not one discrete value", act.Name)
	}
	numActions := int(act.Max[0]) + 1
	if len(dims) < 2 || dims[0] != obsDim || dims[len(dims)-1] != numActions {
		return nil, "", fmt.Errorf("DQN network of layers %v for %d observation values and %d actions", dims, obsDim, numActions)
	}
	qf := func(m map[string]*tensor.Dense, out []float32) error {
		d, ok := m[obs.Name]
		if !ok || d.Dtype() != tensor.Float32 {
			return fmt.Errorf("observation %q missing or not float32", obs.Name)
		}
		xs := d.Float32s()
		n := len(xs) / obsDim
		if n < 1 || len(out) < n*numActions {
			return fmt.Errorf("%d observation values, %d Q-values", len(xs), len(out))
		}
		q(xs[:n*obsDim], n, out[:n*numActions])
		return nil
	}
	pol, err := driver.NewEpsilonGreedyPolicy(act.Name, act.DType, numActions, qf, driver.LinearSchedule{Start: epsilon, End: epsilon}, seed)
	if err != nil {
		return nil, "", err
	}
	return pol, fmt.Sprintf("epsilon-greedy (%g) DQN %v", epsilon, dims), nil
}
