// trajring_gather_windows reads windows of seqlen steps, writes pad steps
// after each window's real steps and the mask (when mask != 0), every
// column in one launch. Grid: x strides over steps, y over columns; column
// index ncols writes the mask.
#include "host/window_gather.h"

extern "C" __global__ void trajring_gather_windows(const tr_col *cols, tr_i64 ncols, const tr_win *wins, tr_i64 nwin, tr_i64 seqlen, tr_i64 capacity, tr_u64 mask)
{
	tr_i64 tid = (tr_i64)blockIdx.x * blockDim.x + threadIdx.x;
	tr_i64 nthreads = (tr_i64)gridDim.x * blockDim.x;
	tr_i64 ny = ncols + (mask != 0 ? 1 : 0);
	for (tr_i64 c = blockIdx.y; c < ny; c += gridDim.y) {
		if (c == ncols)
			tr_window_mask_run(mask, wins, nwin, seqlen, tid, nthreads);
		else
			tr_gather_windows_run(&cols[c], wins, nwin, seqlen, capacity, tid, nthreads);
	}
}
