//go:build cuda

package tensorbuf

import "github.com/trajring/trajring/gpu"

var _ DeviceScatterer = (*gpu.Backend)(nil)
