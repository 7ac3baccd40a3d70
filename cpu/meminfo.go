package cpu

// MemAvailable returns the host memory, in bytes, that new arenas can take
// without swapping (see the package function MemAvailable). It implements
// tensorbuf.MemoryReporter and is safe for concurrent use.
func (*Backend) MemAvailable() (int64, error) { return MemAvailable() }

// ArenasInHostMemory reports true: the backend's arenas are host memory.
// It implements tensorbuf.HostMemory and is safe for concurrent use.
func (*Backend) ArenasInHostMemory() bool { return true }
