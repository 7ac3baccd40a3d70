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

// CopiesToHost returns the device-to-host copies the backend has queued
// since New: one per Download and per HostInto that copied at least one
// byte, whatever its size (each is a DMA transfer, and a Download also a
// host wait). It counts the same calls BytesToHost does, so a real GPU
// and the stand-in report the same figure for the same calls. It is
// safe for concurrent use.
func (b *Backend) CopiesToHost() int64 { return b.d2hN.Load() }

// Syncs returns the times the backend has waited on the host for the
// device since New: every cuStreamSynchronize it issues (Sync, Download,
// Free and FreePinned, and the internal waits before memory still in use
// is reused or freed) and Event.Synchronize. It counts calls, not time,
// so a real GPU and the stand-in report the same figure for the same
// calls. Not counted: a staging slot's wait for an earlier copy still in
// flight when the slot comes round again (flow control after 16 staged
// calls queued ahead of the device, which depends on the device's speed).
// It is safe for concurrent use.
func (b *Backend) Syncs() int64 { return b.syncs.Load() }

// countToHost adds one queued device-to-host copy of n bytes to
// CopiesToHost and BytesToHost.
func (b *Backend) countToHost(n int64) {
	b.d2h.Add(n)
	b.d2hN.Add(1)
}

// syncStream waits on the host for the work queued on the backend's
// stream, counted by Syncs. It runs with the backend entered.
func (b *Backend) syncStream() error {
	b.syncs.Add(1)
	return driverErr("cuStreamSynchronize", b.stream.Synchronize())
}
