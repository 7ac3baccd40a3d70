//go:build !linux

package cpu

import (
	"errors"
	"fmt"
	"os"
)

// ErrNoFileMap: this platform has no file-backed arenas.
var errNoFileMap = errors.New("cpu: file-backed arenas need Linux")

// MapFile is only implemented on Linux; elsewhere it fails.
func MapFile(f *os.File, off, n int64, advice PageAdvice) (*Arena, error) {
	return nil, fmt.Errorf("%w: %s", errNoFileMap, f.Name())
}

// Flush has nothing to flush off Linux.
func (a *Arena) Flush() error { return nil }

// Msync has nothing to flush off Linux.
func Msync(b []byte) error { return nil }

// Retire does nothing off Linux.
func (a *Arena) Retire() error { return nil }

// Resident reports the whole arena off Linux.
func (a *Arena) Resident() (int64, error) { return int64(len(a.b)), nil }

// Evict does nothing off Linux.
func (a *Arena) Evict(f *os.File, off int64) error { return nil }

// WillNeed does nothing off Linux.
func (a *Arena) WillNeed(off, n int64) {}
