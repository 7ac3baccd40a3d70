// Package gpu is trajring's CUDA backend: device arenas, pinned host
// staging, and typed wrappers that launch the kernels of package kernels
// (PTX embedded in the binary) through gorgonia.org/cu. It is compiled only
// in builds tagged cuda and is the only package that imports
// gorgonia.org/cu: in a default build it is empty apart from this
// documentation, and tensorbuf.DefaultBackend returns the cpu backend.
//
// To use it, build with the CUDA toolkit installed and -tags cuda (see
// the README's "CUDA build" section); tensorbuf.DefaultBackend then
// returns this backend, and New gives one directly.
//
// Every driver call of a Backend is made on one goroutine locked to an OS
// thread (runtime.LockOSThread) that holds the CUDA context; the exported
// methods hand their work to it and wait for the answer, so a Backend is
// safe for concurrent use. Work runs on one stream per Backend, in the
// order it was issued: Scatter, GatherRows, GatherWindows, Concat,
// NStepReward, Alloc's zeroing and small Uploads return once their work is
// queued, and Download and Sync wait for it. Wrappers validate every size and index on
// the host before queueing anything and pass kernels only 8-byte
// arguments; a call that returns an error has queued nothing.
//
// Tensors returned by Tensor view device memory: hand them to GPU
// consumers, and copy to the host with Download (after the work that
// writes them, which Download waits for).
package gpu
