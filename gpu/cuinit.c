//go:build trajring_cuda

/*
 * cuinit.c keeps a cuda binary alive on a machine without a usable CUDA
 * driver. gorgonia.org/cu's package init calls cuInit and, when it fails
 * (no device, driver too old, no permission), prints a message and calls
 * os.Exit(1) before main runs. The binary's own definition of cuInit
 * below takes precedence over libcuda's for every call made from this
 * binary (the executable is first in symbol lookup), so cu's init calls
 * it: it forwards to the driver's cuInit (found with dlsym(RTLD_NEXT)),
 * remembers the result for package gpu (which then fails gpu.New with
 * ErrNoDevice) and reports success to cu. libcuda.so.1 itself must still
 * be present: it is a link-time dependency of gorgonia.org/cu.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <cuda.h>

static int init_result = -1; /* -1: cuInit not called yet */

CUresult cuInit(unsigned int flags)
{
	CUresult (*real)(unsigned int) = (CUresult(*)(unsigned int))dlsym(RTLD_NEXT, "cuInit");
	CUresult r = real != NULL ? real(flags) : CUDA_ERROR_NO_DEVICE;
	init_result = (int)r;
	return CUDA_SUCCESS;
}

int trajring_cu_init_result(void)
{
	if (init_result < 0)
		cuInit(0);
	return init_result;
}
