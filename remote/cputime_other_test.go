//go:build !unix

package remote

import "time"

// cpuTime is not measured here (the benchmark logs 0).
func cpuTime() time.Duration { return 0 }
