//go:build trajring_cuda

package gpu

import "gorgonia.org/cu"

// MemAvailable returns the device's free memory in bytes (cuMemGetInfo):
// what new arenas can take now, as far as the driver knows. It implements
// tensorbuf.MemoryReporter and is safe for concurrent use.
func (b *Backend) MemAvailable() (int64, error) {
	err := b.enter()
	if err != nil {
		return 0, err
	}
	defer b.exit()
	free, _, err := cu.MemInfo()
	if err != nil {
		return 0, driverErr("cuMemGetInfo", err)
	}
	return free, nil
}
