//go:build race

package dqn

// raceEnabled: the race detector slows the training test about 9x (36 s).
const raceEnabled = true
