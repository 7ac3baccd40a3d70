package ckptio

import (
	"os"
	"syscall"
	"unsafe"
)

// madvPopulateWrite is MADV_POPULATE_WRITE (Linux 5.14).
const madvPopulateWrite = 23

// prefault asks the kernel to back p with writable pages now, without
// touching its bytes (it never changes memory already written), so that
// a loader reading into p does not pay the page faults. The pages from
// the first page boundary in p on are populated (the kernel takes whole
// pages; the reader faults in the partial first one itself). A hint:
// errors (an older kernel, memory not mapped) are ignored.
func prefault(p []byte) {
	if len(p) == 0 {
		return
	}
	page := uintptr(os.Getpagesize())
	if skip := (page - uintptr(unsafe.Pointer(&p[0]))%page) % page; skip < uintptr(len(p)) {
		_ = syscall.Madvise(p[skip:], madvPopulateWrite)
	}
}
