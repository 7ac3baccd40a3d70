//go:build race

package tensorbuf

// sweepStride is the step of the exhaustive sweeps of single-goroutine
// code (every byte of a checkpoint flipped, every cut) under the race
// detector, which finds nothing there and slows them 3.5x: every fifth
// case. `make test-sweeps` runs them whole without it.
const sweepStride = 5

// raceEnabled: the race detector is on (TestCheckpointKill kills fewer
// children under it; make test-sweeps kills them all).
const raceEnabled = true
