//go:build cuda

package main

import (
	"errors"

	"github.com/spf13/cobra"
)

// newTrainCmd returns a train command that explains why it cannot run in
// this build.
func newTrainCmd() *cobra.Command {
	return &cobra.Command{
		Use:                "train",
		Short:              "train DQN on CartPole-v1 (default builds only)",
		Long:               "Trains DQN on CartPole-v1; available in builds without -tags cuda only.",
		DisableFlagParsing: true,
		RunE: func(*cobra.Command, []string) error {
			return errors.New("train needs a build without -tags cuda: gorgonia's cuda tag turns on its own CUDA engine, which needs cuDNN")
		},
	}
}
