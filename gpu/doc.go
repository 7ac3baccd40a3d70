// Package gpu is trajring's CUDA backend: device arenas, pinned host
// staging, and typed wrappers that launch the kernels of package kernels
// (a fatbin of sm_80 and sm_90 code plus compute_80 PTX, embedded in the
// binary) through gorgonia.org/cu. It is compiled only
// in builds tagged cuda and is the only package that imports
// gorgonia.org/cu: in a default build it is empty apart from this
// documentation, and tensorbuf.DefaultBackend returns the cpu backend.
//
// To use it, build with the CUDA toolkit installed and -tags trajring_cuda (see
// the README's "CUDA build" section); tensorbuf.DefaultBackend then
// returns this backend, and New gives one directly.
//
// Every driver call is made on the calling goroutine: a Backend's mutex
// is taken, the goroutine is locked to its OS thread for the call
// (runtime.LockOSThread) and the device's primary context is made current
// on that thread for the call (see bind: the thread's own current context,
// if any, is put back afterwards), so a call costs a mutex and a few cgo
// calls, not a hand-off to another goroutine. A Backend is safe
// for concurrent use; its calls are serialised. Work runs on one
// non-blocking stream per Backend, in the order it was issued: Scatter,
// GatherRows, GatherWindows, Concat, NStepReward, Alloc's zeroing, Copy,
// Upload and HostInto return once their work is queued, and Download and
// Sync wait for it. Wrappers validate every size and index on the host
// before queueing anything and pass kernels only 8-byte arguments; a call
// that returns an error has queued nothing.
//
// The primary context is retained by the first New and kept for the life
// of the process, with the kernels loaded once (see driver.go). Other code
// in the process shares it (cudart-based libraries): a cudaDeviceReset or
// cuDevicePrimaryCtxReset there destroys every arena, stream, event and
// loaded kernel of every Backend, and later calls fail with driver errors
// until the process restarts, so reset the device only after closing
// every Backend, and then only to exit.
//
// Tensors returned by Tensor view device memory and carry an engine that
// gorgonia.org/tensor sees as not host-accessible (see DeviceEngine): hand
// them to GPU consumers (Uintptr), order those with events (Record,
// WaitHandle), and copy to the host with Download or HostInto.
//
// A sticky device fault (an illegal address in a kernel, a device-side
// assert, a launch failure) makes the context unusable for the rest of the
// process: the call that observes it returns an error wrapping
// ErrDeviceLost, and so does every later call of every Backend, without
// touching the driver. Health checks for one.
package gpu
