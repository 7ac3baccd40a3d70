//go:build cgo

package capi

/*
#include <stdint.h>
*/
import "C"

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime/debug"
	"sync/atomic"
	"unsafe"

	"github.com/trajring/trajring/driver"
	"github.com/trajring/trajring/observer"
	"github.com/trajring/trajring/tensorbuf"
)

// Status codes of the ABI. Each names the sentinel error a failure wraps;
// the Python package raises one exception class per code.
const (
	codeOK             = 0
	codeInvalidArg     = 1  // tensorbuf.ErrInvalidArg and anything unclassified
	codeHandle         = 2  // ErrHandle
	codeConfig         = 3  // tensorbuf.ErrConfig, observer.ErrConfig
	codeUnknownField   = 4  // tensorbuf.ErrUnknownField
	codeMissingField   = 5  // tensorbuf.ErrMissingField
	codeDType          = 6  // tensorbuf.ErrDType
	codeShape          = 7  // tensorbuf.ErrShape
	codeRows           = 8  // tensorbuf.ErrRows
	codeRowOwned       = 9  // tensorbuf.ErrRowOwned
	codeUnknownTable   = 10 // tensorbuf.ErrUnknownTable
	codeTableExists    = 11 // tensorbuf.ErrTableExists
	codeStepType       = 12 // tensorbuf.ErrStepType, tensorbuf.ErrContinuity
	codeSequenceLen    = 13 // tensorbuf.ErrSequenceLen
	codeItem           = 14 // tensorbuf.ErrItem
	codeUnknownKey     = 15 // tensorbuf.ErrUnknownKey
	codeEmpty          = 16 // tensorbuf.ErrEmpty
	codeClosed         = 17 // tensorbuf.ErrClosed
	codeBackend        = 18 // tensorbuf.ErrBackend
	codeRateLimited    = 19 // tensorbuf.ErrRateLimited
	codeCorrupt        = 20 // tensorbuf.ErrCorrupt
	codeDeviceTensor   = 21 // tensorbuf.ErrDeviceTensor
	codeIO             = 22 // an error of the file system
	codeWouldBlock     = 23 // a wait that ran out of its slice (see waitSlice)
	codeEnv            = 24 // driver and environment errors
	codeInternal       = 25 // a recovered panic: the library refuses further calls
	codeBusy           = 26 // ErrBusy
	codeEpisodeTooLong = 27 // observer.ErrEpisodeTooLong
)

// ErrHandle is the error of a handle that is not one, was released, or
// names an object of another kind.
var ErrHandle = errors.New("capi: unknown or released handle")

// ErrBusy is the error of a call that would change a result while
// tensors taken from it are still alive, or release a buffer's object in
// use by another thread.
var ErrBusy = errors.New("capi: result has live tensors")

// errWouldBlock is a rate-limited wait that used up its slice of time; the
// caller (Python) checks for signals and calls again.
var errWouldBlock = errors.New("capi: wait not over")

// errInternal reports a recovered panic.
var errInternal = errors.New("capi: internal error")

var classes = []struct {
	err  error
	code int32
}{
	{ErrHandle, codeHandle},
	{ErrBusy, codeBusy},
	{errWouldBlock, codeWouldBlock},
	{errInternal, codeInternal},
	{tensorbuf.ErrDeviceTensor, codeDeviceTensor},
	{tensorbuf.ErrUnknownField, codeUnknownField},
	{tensorbuf.ErrMissingField, codeMissingField},
	{tensorbuf.ErrDType, codeDType},
	{tensorbuf.ErrShape, codeShape},
	{tensorbuf.ErrRowOwned, codeRowOwned},
	{tensorbuf.ErrRows, codeRows},
	{tensorbuf.ErrUnknownTable, codeUnknownTable},
	{tensorbuf.ErrTableExists, codeTableExists},
	{tensorbuf.ErrStepType, codeStepType},
	{tensorbuf.ErrContinuity, codeStepType},
	{tensorbuf.ErrSequenceLen, codeSequenceLen},
	{tensorbuf.ErrItem, codeItem},
	{tensorbuf.ErrUnknownKey, codeUnknownKey},
	{tensorbuf.ErrEmpty, codeEmpty},
	{tensorbuf.ErrClosed, codeClosed},
	{tensorbuf.ErrRateLimited, codeRateLimited},
	{tensorbuf.ErrCorrupt, codeCorrupt},
	{tensorbuf.ErrBackend, codeBackend},
	{tensorbuf.ErrConfig, codeConfig},
	{observer.ErrConfig, codeConfig},
	{observer.ErrEpisodeTooLong, codeEpisodeTooLong},
	{driver.ErrConfig, codeConfig},
	{observer.ErrClosed, codeClosed},
	{driver.ErrClosed, codeClosed},
	{driver.ErrNotReset, codeEnv},
	{driver.ErrEnv, codeEnv},
	{driver.ErrSpec, codeInvalidArg}, // shapes and dtypes are checked first: what is left are values
	{driver.ErrInvalidArg, codeInvalidArg},
	{tensorbuf.ErrInvalidArg, codeInvalidArg},
	{context.DeadlineExceeded, codeRateLimited},
	{context.Canceled, codeRateLimited},
}

// codeOf classifies err by the first sentinel it wraps.
func codeOf(err error) int32 {
	for _, c := range classes {
		if errors.Is(err, c.err) {
			return c.code
		}
	}
	var pe *os.PathError
	if errors.As(err, &pe) {
		return codeIO
	}
	return codeInvalidArg
}

// poisoned is set once an export has recovered from a panic: the state of
// the object it was using is unknown, so every later call fails.
var poisoned atomic.Bool

// status writes err's message into the caller's buffer and returns its
// code; nil gives codeOK.
func status(err error, buf *C.char, cap C.int64_t) C.int32_t {
	if err == nil {
		return codeOK
	}
	writeMsg(err.Error(), buf, cap)
	return C.int32_t(codeOf(err))
}

// writeMsg copies msg, truncated and NUL-terminated, into buf.
func writeMsg(msg string, buf *C.char, cap C.int64_t) {
	if buf == nil || cap <= 0 {
		return
	}
	n := min(int64(len(msg)), int64(cap)-1)
	dst := unsafe.Slice((*byte)(unsafe.Pointer(buf)), int64(cap))
	copy(dst, msg[:n])
	dst[n] = 0
}

// guard runs f as the body of an export: it refuses calls once the
// library is poisoned and turns a panic into codeInternal.
func guard(buf *C.char, cap C.int64_t, f func() error) (code C.int32_t) {
	if poisoned.Load() {
		return status(fmt.Errorf("%w: an earlier call panicked; restart the process", errInternal), buf, cap)
	}
	defer func() {
		if r := recover(); r != nil {
			if !poisoned.Swap(true) {
				fmt.Fprintf(os.Stderr, "trajring: panic in the C ABI: %v\n%s", r, debug.Stack())
				poisonExports() // the C fast path refuses too (pydlpack.c)
			}
			code = status(fmt.Errorf("%w: panic: %v", errInternal, r), buf, cap)
		}
	}()
	return status(f(), buf, cap)
}
