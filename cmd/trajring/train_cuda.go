//go:build cuda

package main

import (
	"errors"
	"io"
)

func init() {
	commands["train"] = command{run: func([]string, io.Writer, io.Writer) error {
		return errors.New("train needs a build without -tags cuda: gorgonia's cuda tag turns on its own CUDA engine, which needs cuDNN")
	}, summary: "train DQN on CartPole-v1 (default builds only)"}
}
