//go:build !race

package tensorbuf

// sweepStride: without the race detector the sweeps take every case.
const sweepStride = 1

const raceEnabled = false
