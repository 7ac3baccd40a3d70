/* The registry entry of capi/pydlpack.c, shared with capi/dlpack.go,
 * which fills one and hands it to trj_export_publish in one call. */
#ifndef TRAJRING_PYDLPACK_H
#define TRAJRING_PYDLPACK_H

#include <stdint.h>
#include "trajring_abi.h"

#define TRJ_EXPORT_MAX_VIEWS 32

/* One host view of a result: what a DLPack tensor of it needs. */
typedef struct {
	uint64_t data;
	trj_dl_dtype dtype;
	int32_t ndim;
	int64_t shape[TRJ_MAX_DIMS];
} trj_export_view;

/* The views of a result whose view group lives, keyed by its handle. */
typedef struct trj_export {
	uint64_t handle;
	void *group;
	int32_t n;
	trj_export_view views[TRJ_EXPORT_MAX_VIEWS];
	struct trj_export *next;
} trj_export;

void trj_export_publish(const trj_export *src);
void trj_export_forget(uint64_t handle, void *group);

#endif
