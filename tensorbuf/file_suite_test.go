package tensorbuf

import (
	"os"
	"path/filepath"
	"strconv"
	"sync/atomic"
)

// With TRAJRING_TEST_FILE_BACKED set (make test-file-backed), every cpu
// buffer a test creates without a directory is file-backed, in a fresh
// directory under one the variable names (or a temporary one), so that
// the suite's tests (the property test against the model, the seeded
// samples, the checkpoints) check file-backed buffers too.
func init() {
	root := os.Getenv("TRAJRING_TEST_FILE_BACKED")
	if root == "" {
		return
	}
	if root == "1" {
		var err error
		if root, err = os.MkdirTemp("", "trajring-file-backed-"); err != nil {
			panic(err)
		}
	}
	// A directory per process: kill tests start children of this binary.
	root = filepath.Join(root, strconv.Itoa(os.Getpid()))
	var n atomic.Int64
	fileBackedForTests = func() string {
		return filepath.Join(root, strconv.FormatInt(n.Add(1), 10))
	}
}
