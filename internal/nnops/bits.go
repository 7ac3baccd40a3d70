package nnops

import "math"

func math32bits(v float32) uint32     { return math.Float32bits(v) }
func math32frombits(u uint32) float32 { return math.Float32frombits(u) }
