//go:build cuda

package main

import (
	"errors"

	"github.com/trajring/trajring/driver"
	"github.com/trajring/trajring/tensorbuf"
)

// paramsPolicy: agents/dqn (the Go DQN network) is not part of cuda
// builds, so an actor built with -tags cuda keeps its random policy.
func paramsPolicy(blob []byte, obs, act tensorbuf.Field, epsilon float64, seed uint64) (driver.Policy, string, error) {
	return nil, "", errors.New("DQN policies need a build without -tags cuda; keeping the random policy")
}
