//go:build !linux

package ckptio

// prefault is a no-op where the kernel has no MADV_POPULATE_WRITE.
func prefault([]byte) {}
