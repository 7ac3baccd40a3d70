/* trajring's C ABI: the types shared by the Go exports (capi/*.go), the C
 * helpers (capi/dlpack.c) and the Python package's ctypes mirrors
 * (python/trajring/_abi.py). Every function of the ABI returns an int32
 * status (TRJ_OK or one of the TRJ_E* codes of capi/errors.go) and takes
 * (char *err, int64_t errcap) last: on failure it writes a NUL-terminated
 * message there (truncated to errcap bytes); err may be NULL. Objects are
 * opaque uint64 handles; 0 is never a handle. */
#ifndef TRAJRING_ABI_H
#define TRAJRING_ABI_H

#include <stdint.h>

/* DLPack (dmlc/dlpack include/dlpack/dlpack.h, v1.1), the subset used. */
typedef struct {
	int32_t device_type; /* kDLCPU = 1, kDLCUDA = 2 */
	int32_t device_id;
} trj_dl_device;

typedef struct {
	uint8_t code; /* int 0, uint 1, float 2 */
	uint8_t bits;
	uint16_t lanes;
} trj_dl_dtype;

typedef struct {
	void *data;
	trj_dl_device device;
	int32_t ndim;
	trj_dl_dtype dtype;
	int64_t *shape;
	int64_t *strides;
	uint64_t byte_offset;
} trj_dl_tensor;

typedef struct trj_dl_managed {
	trj_dl_tensor dl_tensor;
	void *manager_ctx;
	void (*deleter)(struct trj_dl_managed *self);
} trj_dl_managed;

typedef struct trj_dl_managed_versioned {
	uint32_t major, minor;
	void *manager_ctx;
	void (*deleter)(struct trj_dl_managed_versioned *self);
	uint64_t flags;
	trj_dl_tensor dl_tensor;
} trj_dl_managed_versioned;

#define TRJ_MAX_DIMS 8

/* Returned by trj_writer_add_py (capi/pyadd.c), never by a Go export: the
 * input needs the caller's general path; nothing was done. */
#define TRJ_FALLBACK (-1)

/* One tensor of a result, as trj_result_tensor describes it. */
typedef struct {
	uint64_t data;   /* address of the first element; 0 for an empty tensor */
	int32_t device;  /* 1 host, 2 CUDA device memory */
	int32_t dtype;   /* a TRJ_DT_* code */
	int32_t ndim;
	int32_t pad;
	int64_t shape[TRJ_MAX_DIMS];
} trj_tensor_desc;

/* Element types across the ABI (tensorbuf's DTypes, plus uint64 and
 * float64 for metadata). Bool fields are exported as uint8. */
enum {
	TRJ_DT_FLOAT32 = 0,
	TRJ_DT_FLOAT64 = 1,
	TRJ_DT_INT32 = 2,
	TRJ_DT_INT64 = 3,
	TRJ_DT_UINT8 = 4,
	TRJ_DT_BOOL = 5
};

/* One batched add: nrows rows (rows[i], or the writer's rows in order when
 * rows is NULL), the four trajectory columns (nrows values each) and every
 * user field of the buffer by position, each a C-contiguous array of
 * nbytes[i] bytes of dtype[i] shaped shape[off..off+ndim[i]) where off is
 * the sum of the earlier ndims. */
typedef struct {
	int64_t nrows;
	const int64_t *rows;
	const int32_t *step_type;
	const int32_t *next_step_type;
	const float *reward;
	const float *discount;
	int64_t ncols; /* the length of each of the four columns */
	int64_t nfields;
	void *const *data;
	const int64_t *nbytes;
	const int32_t *dtype;
	const int32_t *ndim;
	const int64_t *shape;
} trj_step;

/* Arrays passed by position (an env's action fields): n arrays, each
 * C-contiguous, of nbytes[i] bytes of dtype[i], shaped shape[off..off+ndim[i])
 * where off is the sum of the earlier ndims. */
typedef struct {
	int64_t n;
	void *const *data;
	const int64_t *nbytes;
	const int32_t *dtype;
	const int32_t *ndim;
	const int64_t *shape;
} trj_arrays;

/* Where an env's step or reset writes its outputs: the observation fields
 * by position (each exactly [num_envs, ...field shape] of the field's
 * dtype, nbytes[i] bytes), and num_envs rewards, terminated and truncated
 * flags (0 or 1) and step types. Any of the last four may be NULL. */
typedef struct {
	int64_t nobs;
	void *const *obs;
	const int64_t *obs_nbytes;
	float *reward;
	uint8_t *terminated;
	uint8_t *truncated;
	int32_t *step_type;
} trj_env_out;

/* Called by the DLPack deleters and capsule destructor in dlpack.c. */
void trj_dlpack_deleter(trj_dl_managed *m);
void trj_dlpack_deleter_versioned(trj_dl_managed_versioned *m);

#endif
