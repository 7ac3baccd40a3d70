//go:build !trajring_cuda

package dqn

import (
	"fmt"

	"github.com/trajring/trajring/tensorbuf"
)

// gpuBuild reports whether this build has DeviceLearner.
const gpuBuild = false

// newDeviceTrainLearner fails: DeviceLearner needs a trajring_cuda build.
func newDeviceTrainLearner(Config, bool) (learner, tensorbuf.Backend, error) {
	return nil, nil, fmt.Errorf("%w: Backend gpu: this build has no gpu learner (build with -tags trajring_cuda)", ErrConfig)
}
