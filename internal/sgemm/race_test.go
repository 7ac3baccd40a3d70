//go:build race

package sgemm

// raceEnabled: the race detector slows the reference loops about 20x.
const raceEnabled = true
