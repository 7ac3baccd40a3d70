//go:build race

package explog

// raceDetector: the race detector slows these single-goroutine sweeps
// about 3.5x and finds nothing in them, so under -race they run a sample
// (make test runs the whole sweep without it: test-sweeps).
const raceDetector = true
