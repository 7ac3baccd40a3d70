//go:build linux

package bench

import (
	"time"

	"golang.org/x/sys/unix"
)

// threadCPU returns the CPU time of the calling thread, to the
// nanosecond (CLOCK_THREAD_CPUTIME_ID), or 0 if the clock is unavailable.
// Other processes' load disturbs it less than wall time.
func threadCPU() time.Duration {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts); err != nil {
		return 0
	}
	return time.Duration(ts.Nano())
}
