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
		RunE: func(cmd *cobra.Command, args []string) error {
			// Flags are not parsed (the default build's are not defined
			// here), so help is answered by hand.
			for _, a := range args {
				if a == "-h" || a == "-help" || a == "--help" {
					return cmd.Help()
				}
			}
			return errors.New("train needs a build without -tags cuda: gorgonia's cuda tag turns on its own CUDA engine, which needs cuDNN")
		},
	}
}
