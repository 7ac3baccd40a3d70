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

// flockFile takes an exclusive lock on f without waiting (flock): it
// fails with EWOULDBLOCK while another open file description holds it.
func flockFile(f *os.File) error {
	return syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
}

// diskFree returns the bytes free to unprivileged users on dir's file
// system (statfs), and false when they cannot be read.
func diskFree(dir string) (int64, bool) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return 0, false
	}
	return int64(st.Bavail) * int64(st.Bsize), true
}
