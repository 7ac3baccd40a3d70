//go:build cuda

package main

import (
	"errors"

	"github.com/spf13/cobra"
)

// newEvalCmd returns an eval command that explains why it cannot run in
// this build (it plays dqn networks, built without -tags cuda only).
func newEvalCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "eval MODEL",
		Short: "play a saved DQN network greedily on CartPole-v1 (default builds only)",
		Long:  "Plays a saved DQN network greedily on CartPole-v1; available in builds without -tags cuda only.",
		RunE: func(*cobra.Command, []string) error {
			return errors.New("eval needs a build without -tags cuda: package dqn is built only without it (see trajring train)")
		},
	}
}
