// trajring_relu_grad zeroes dy[i] wherever the ReLU's output y[i] is not
// positive: the gradient through the ReLU, in place (host/mlp.h). Grid: x
// strides over elements; y is unused (1).
#include "host/mlp.h"

extern "C" __global__ void trajring_relu_grad(float *dy, const float *y, tr_i64 n)
{
	tr_i64 tid = (tr_i64)blockIdx.x * blockDim.x + threadIdx.x;
	tr_i64 nthreads = (tr_i64)gridDim.x * blockDim.x;
	tr_relu_grad_run(dy, y, n, tid, nthreads);
}
