//go:build trajring_cuda

package bench

// cudaBuild: fixtures live on the gpu backend (the stand-in driver in CI).
const cudaBuild = true
