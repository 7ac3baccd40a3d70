//go:build !amd64 || purego

package treestep

import "unsafe"

// levelAsm is nil: Level runs its Go loop.
var levelAsm = best()

func best() func(level unsafe.Pointer, groups int, us, out unsafe.Pointer, start, n int) int {
	return nil
}

// setImpl reports whether Level can run impl: only the Go loop here.
func setImpl(impl int) bool { return impl == implGo }
