//go:build !unix

package dqn

import "time"

// cpuTime returns 0: there is no getrusage here.
func cpuTime() time.Duration { return 0 }
