package cpu

import (
	"syscall"
	"unsafe"
)

func msync(b []byte, flags int) error {
	_, _, e := syscall.Syscall(syscall.SYS_MSYNC, uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)), uintptr(flags))
	if e != 0 {
		return e
	}
	return nil
}
