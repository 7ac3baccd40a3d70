//go:build cgo

// Package capi is trajring's C ABI: the functions a shared library built
// with go build -buildmode=c-shared exports (see capi/libtrajring), over
// which the Python package python/trajring is a thin ctypes layer.
//
// The ABI holds no engine logic of its own: every call validates what
// crosses the boundary (handles, NULLs, lengths, dtypes, shapes), turns it
// into the tensorbuf, observer or driver call it stands for, and turns the
// result back. The contract, for every function:
//
//   - Objects are opaque uint64 handles, never pointers; 0 is no handle, and
//     a handle is never reused, so a released one fails with TRJ_EHANDLE.
//   - The return value is a status: 0, or a TRJ_E* code naming the Go
//     sentinel error the failure wraps (see codes); the last two arguments
//     (err, errcap) receive its message, the sentinel's text included.
//   - A call that fails changes nothing, as the Go call it stands for.
//   - No input crashes the process: every export recovers from panics
//     (reported as TRJ_EINTERNAL, after which the library refuses every
//     call), and pointers are only read within the lengths given.
//   - Every function is safe to call from many threads at once.
//
// Memory handed out (the tensors of samples and exports, through DLPack or
// trj_result_tensor) stays valid until the caller drops its result handle
// and every DLPack tensor taken from it has been deleted: Go-heap memory
// is pinned (runtime.Pinner) for exactly that long, and a result is not
// refilled, recycled or released before then, even when its buffer is
// closed.
package capi
