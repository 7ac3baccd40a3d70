//go:build cgo

// Command goenv builds trajring's shared library with a user's own Go
// environment, PointMass-v0, beside the built-in ones (docs/python.md):
//
//	go build -buildmode=c-shared -o build/libpointmass.so ./python/examples/goenv
//	TRAJRING_LIBRARY=build/libpointmass.so PYTHONPATH=python /usr/bin/python3 -c \
//		'import trajring; print(trajring.make("PointMass-v0", num_envs=4).reset()[0])'
package main

import (
	"github.com/trajring/trajring/capi"
	"github.com/trajring/trajring/python/examples/goenv/pointmass"
)

func init() {
	if err := capi.RegisterParallel("PointMass-v0", pointmass.New); err != nil {
		panic(err)
	}
}

func main() {}
