//go:build trajring_cuda

package tensorbuf

import "github.com/trajring/trajring/gpu"

var _ DeviceScatterer = (*gpu.Backend)(nil)
