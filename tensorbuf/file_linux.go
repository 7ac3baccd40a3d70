package tensorbuf

import (
	"os"
	"syscall"
)

// fallocate allocates the blocks of f's first n bytes (the file grows to n).
func fallocate(f *os.File, n int64) error {
	for {
		err := syscall.Fallocate(int(f.Fd()), 0, 0, n)
		if err != syscall.EINTR {
			return err
		}
	}
}
