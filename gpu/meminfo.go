//go:build cuda

package gpu

import "gorgonia.org/cu"

// MemAvailable returns the device's free memory in bytes (cuMemGetInfo):
// what new arenas can take now, as far as the driver knows. It implements
// tensorbuf.MemoryReporter and is safe for concurrent use.
func (b *Backend) MemAvailable() (int64, error) {
	c := newCall(opMemInfo)
	err := b.do(c)
	n := c.n
	c.put()
	return n, err
}

// memInfo runs on the worker, with the context current.
func (b *Backend) memInfo(c *call) error {
	free, _, err := cu.MemInfo()
	if err != nil {
		return driverErr("cuMemGetInfo", err)
	}
	c.n = free
	return nil
}
