//go:build !race

package explog

const raceDetector = false
