package tensorbuf

import (
	"github.com/trajring/trajring/kernels"
	"gorgonia.org/tensor"
)

// Arena is one block of backend memory (host or device).
//
// Arena, Column and Window are kernel-level types that users of Buffer,
// Writer and Table never need. They are exported because the Backend
// interface, which users may implement (another device, a test double),
// takes them in its methods: hiding them would make Backend impossible
// to implement outside this module. They are aliases of package kernels'
// types, so the cpu and gpu backends and the kernels share one
// definition.
type Arena = kernels.Arena

// Column describes one field's part of a data movement; see
// kernels.Column. Only Backend implementations need it (see Arena).
type Column = kernels.Column

// Window is one sequence read by Backend.GatherWindows; see
// kernels.Window. Only Backend implementations need it (see Arena).
type Window = kernels.Window

// Backend moves bytes for a Buffer. The cpu package implements it on host
// memory and the gpu package (cuda builds) on device memory; the default
// one is chosen by build tags (see DefaultBackend).
//
// Every method validates its arguments before touching memory and writes
// nothing when it returns an error. Implementations must be safe for
// concurrent use by calls that write disjoint memory. Methods may run
// asynchronously: results are visible to Download, and to host code
// reading tensors, after Sync.
type Backend interface {
	// Name identifies the backend ("cpu", "gpu").
	Name() string
	// Alloc returns a zeroed arena of n bytes.
	Alloc(n int64) (Arena, error)
	// Free releases an arena.
	Free(a Arena) error
	// Upload copies host bytes into an arena at byte offset off.
	Upload(dst Arena, off int64, src []byte) error
	// Download copies len(dst) bytes from an arena at byte offset off.
	Download(dst []byte, src Arena, off int64) error
	// Scatter writes step i of src[c] to ring step idx[i] of every column c,
	// all columns in one call.
	Scatter(cols []Column, src [][]byte, idx []int64) error
	// GatherRows writes ring step idx[i] of every column to its output step i.
	GatherRows(cols []Column, idx []int64) error
	// GatherWindows writes window b's step t to output step b*seqLen+t,
	// padding after the window's real steps, and the mask to mask.
	GatherWindows(cols []Column, wins []Window, seqLen, capacity int64, mask Arena, maskOff int64) error
	// Concat writes transitions: ring step idx[i] to output step i, and for
	// columns with a NextOut, ring step next[i] to successor step i.
	Concat(cols []Column, idx, next []int64) error
	// Tensor returns a tensor viewing an arena's memory (device memory for
	// device arenas).
	Tensor(a Arena, off int64, dt tensor.Dtype, shape ...int) (*tensor.Dense, error)
	// Sync waits until all work issued so far has finished.
	Sync() error
	// Close releases the backend.
	Close() error
}

// MemoryReporter is implemented by backends that can tell how much memory
// new arenas may take: the cpu backend reports the host's available
// memory (MemAvailable of /proc/meminfo on Linux), the gpu backend the
// device's free memory. New refuses, with ErrConfig and before allocating
// anything, a buffer that does not fit; with a backend that does not
// implement it, or whose report fails, only the overflow checks apply.
// Implementations must be safe for concurrent use.
type MemoryReporter interface {
	// MemAvailable returns the bytes of memory new arenas can take now.
	MemAvailable() (int64, error)
}

// HostMemory is implemented by backends whose arenas are host memory,
// such as the cpu backend: New then counts the arenas and the buffer's host
// metadata together against the host's available memory, since both take
// from it. Implementations must be safe for concurrent use.
type HostMemory interface {
	// ArenasInHostMemory reports whether new arenas take host memory.
	ArenasInHostMemory() bool
}

// DeviceScatterer is implemented by backends whose Scatter can also read
// a column's source steps from a tensor in the backend's own memory, in
// place: Writer.Add uses it for a step whose field tensors are device
// tensors of the buffer's backend, so a GPU-resident environment's step
// reaches the ring device to device, with no host staging of its bytes.
// The gpu backend of cuda builds accepts device tensors viewing a live
// arena of its own (Backend.Tensor over memory from its Alloc, or a batch
// it returned) and reads them in the one scatter launch; the cpu
// backend's memory is host memory, so its sources are contiguous host
// tensors, read in place. Implementations must be safe for concurrent use
// as Backend's methods are.
type DeviceScatterer interface {
	// CheckSource returns an error unless the first n bytes of t are
	// memory of this backend that ScatterFrom reads.
	CheckSource(t *tensor.Dense, n int64) error
	// ScatterFrom is Scatter where the source of column c is the tensor
	// dev[c] when it is not nil (its first len(idx)*StepBytes bytes, and
	// src[c] is nil), src[c] otherwise; len(dev) == len(cols). Device
	// sources are read by work queued after all work queued before the
	// call, and must not be overwritten until it has run.
	ScatterFrom(cols []Column, src [][]byte, dev []*tensor.Dense, idx []int64) error
}
