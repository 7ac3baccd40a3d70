//go:build !linux

package bench

import "time"

// threadCPU returns 0: the thread CPU clock is read on linux only.
func threadCPU() time.Duration { return 0 }
