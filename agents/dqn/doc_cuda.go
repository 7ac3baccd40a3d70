//go:build cuda

// Package dqn is built only without the cuda tag: gorgonia.org/gorgonia
// reads the same tag to turn on its own CUDA engine, which needs cuDNN
// (not installable here). See the package documentation of a default
// build.
package dqn
