//go:build trajring_cuda

package gpu

// BytesToHost returns the bytes the backend has copied from device to
// host memory since New: every Download and HostInto, and so every
// host-visible result built on them (Batch.HostMeta, a learner's
// Network or Loss, the greedy actions of acting, table reads that wait
// for the device). A copy counts once it is queued. A training loop
// reads it before and after its gradient steps to show that they copy
// nothing back. It is safe for concurrent use.
func (b *Backend) BytesToHost() int64 { return b.d2h.Load() }

// countToHost adds n queued device-to-host bytes to BytesToHost.
func (b *Backend) countToHost(n int64) { b.d2h.Add(n) }
