//go:build trajring_cuda

package gpu

/*
#include <cuda.h>

static CUresult trajring_reserve(CUdeviceptr *p, size_t n) { return cuMemAddressReserve(p, n, 0, 0, 0); }
static CUresult trajring_unreserve(CUdeviceptr p, size_t n) { return cuMemAddressFree(p, n); }
*/
import "C"

import "gorgonia.org/cu"

// reservedBytes is the size of a reserveUnmapped range: a multiple of
// every device's allocation granularity (2 MiB on current GPUs), as
// cuMemAddressReserve requires.
const reservedBytes = 32 << 20

// reserveUnmapped reserves reservedBytes of the context's virtual address
// space with no memory mapped behind it: no allocation of this process
// will get an address in it, and a kernel that reads it faults with a
// sticky error. The sticky-fault probe reads it, since any fixed address
// might be mapped (device memory, or host memory a driver with HMM lets
// kernels read). Free it with freeReserved. It runs with the context
// bound.
func reserveUnmapped() (cu.DevicePtr, error) {
	var p C.CUdeviceptr
	if r := C.trajring_reserve(&p, reservedBytes); r != C.CUDA_SUCCESS {
		return 0, driverErr("cuMemAddressReserve", cudaError(r))
	}
	return cu.DevicePtr(p), nil
}

// freeReserved releases a range from reserveUnmapped. It runs with the
// context bound.
func freeReserved(p cu.DevicePtr) error {
	if r := C.trajring_unreserve(C.CUdeviceptr(p), reservedBytes); r != C.CUDA_SUCCESS {
		return driverErr("cuMemAddressFree", cudaError(r))
	}
	return nil
}
