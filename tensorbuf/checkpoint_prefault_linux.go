package tensorbuf

import "syscall"

// madvPopulateWrite is MADV_POPULATE_WRITE (Linux 5.14).
const madvPopulateWrite = 23

// prefault asks the kernel to back p with writable pages now, without
// touching its bytes (it never changes memory already written), so that
// a loader reading into p does not pay the page faults. A hint: errors
// (an older kernel, memory not page-aligned) are ignored.
func prefault(p []byte) {
	if len(p) > 0 {
		_ = syscall.Madvise(p, madvPopulateWrite)
	}
}
