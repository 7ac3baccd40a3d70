package cpu

// MemAvailable returns the host memory, in bytes, that new arenas can take
// without swapping (see the package function MemAvailable). It implements
// tensorbuf.MemoryReporter and is safe for concurrent use.
func (*Backend) MemAvailable() (int64, error) { return MemAvailable() }
