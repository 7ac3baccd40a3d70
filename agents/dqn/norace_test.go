//go:build !race && !cuda

package dqn

const raceEnabled = false
