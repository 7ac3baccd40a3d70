//go:build !linux

package tensorbuf

import "os"

// fallocate grows f to n bytes (blocks are not reserved off Linux).
func fallocate(f *os.File, n int64) error { return f.Truncate(n) }

// flockFile does not lock off Linux (file-backed buffers need Linux:
// cpu.MapFile fails elsewhere).
func flockFile(f *os.File) error { return nil }

// diskFree is unknown off Linux.
func diskFree(dir string) (int64, bool) { return 0, false }
