//go:build !linux

package cpu

import (
	"errors"
	"fmt"
)

// MemAvailable returns the host memory, in bytes, available for new
// allocations without swapping: MemAvailable of /proc/meminfo on Linux.
// Elsewhere, as here, it returns an error wrapping errors.ErrUnsupported
// and callers must do without it. It is safe for concurrent use.
func MemAvailable() (int64, error) {
	return 0, fmt.Errorf("cpu: available memory: %w", errors.ErrUnsupported)
}
